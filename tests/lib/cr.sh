# cr.sh: helpers for the checkpoint/restart tests (tests/cr/*.sh), in the
# zdtm manner: run an MPI program uninterrupted, run it again under
# stasis-run, SIGKILL every process of the job after some checkpoints,
# restart it with stasis-restart and require the same output, bit for bit.
#
# Source it from a test script that uses `set -euo pipefail`, then call
# cr_setup first. Exit status of a test: 0 pass, 1 fail, 77 skip.
#
# Environment:
#   STASIS_BUILD     build root (meson passes it): tools/ and tests/apps/
#   CR_STASIS_RUN, CR_STASIS_RESTART
#                    override the tools (used to test the harness itself)
#   CR_NP            ranks (default 4)
#   CR_LAUNCHER      mpirun (default) or another name of it, e.g. mpiexec;
#                    or MPICH's mpiexec.mpich (hydra: -n, no --oversubscribe)
#   CR_TIMEOUT       seconds to wait for a line or an exit (default 120)
#   CR_KEEP_TMP=1    keep the temporary directory even on success
#
# Jobs are named; job NAME writes $CR_TMP/NAME.out and $CR_TMP/NAME.err.

CR_NP=${CR_NP:-4}
CR_TIMEOUT=${CR_TIMEOUT:-120}
CR_TMP=
CR_APP=
CR_ARGS=()
CR_JOBS=()           # names of started jobs, for the exit trap
CR_AT_EXIT=()        # commands the exit trap runs once the jobs are gone (umount ...)
declare -gA CR_PID   # job name -> pid (also its session and process group id)
declare -gA CR_STATUS # job name -> exit status once reaped

# Default sizes: 2-6 s uninterrupted with 4 ranks on 2 cores, quiet or
# loaded; cr_reference lengthens a run that is too quick.
cr_default_args() {
	case $1 in
	heat) echo "768 6000" ;;
	heat_f) echo "768 8000" ;;
	state) echo "65536 5000" ;;
	comms) echo "4096 2000" ;;
	types) echo "256 1000" ;;
	persist) echo "8192 2000" ;;
	fsplit) echo "128 2000" ;;
	objects) echo "64 2000" ;;
	ring) echo "4096 20000" ;;
	master) echo "2000 20000" ;;
	flood) echo "2000 200" ;;
	slow) echo "20 4" ;;
	halves) echo "4096 4000" ;;
	blacs) echo "1024 4000" ;;
	pchol) echo "96 400" ;;
	mprobe) echo "16 200000" ;;
	nbc) echo "4096 20000" ;;
	anyof) echo "512 20000" ;;
	children) echo "4096 400" ;;
	wtime) echo "4096 4000" ;;
	mpi1) echo "4096 40000" ;;
	f08solve) echo "96 28000" ;;
	fcallbacks) echo "64 20000" ;;
	protected_io) echo "16384 4000" ;;
	segv_handler) echo "131072 6000" ;;
	alarm) echo "4096 3000" ;;
	evloop) echo "65536 16000" ;;
	tramp) echo "65536 3000" ;;
	uselib) echo "4096 2000" ;;
	phases) echo "8 200" ;;
	files | files_f) echo "4096 20000" ;;
	mpiio) echo "64 6000" ;;
	tls) echo "4096 8000" ;;
	plugin) echo "4096 8000" ;;
	workers) echo "4096 4000" ;;
	omp) echo "65536 4000" ;;
	*) echo "" ;;
	esac
}

cr_say() { printf '%s\n' "$*"; }
cr_ok() { printf 'ok: %s\n' "$*"; }

cr_fail() {
	printf 'FAIL: %s\n' "$*"
	exit 1
}

cr_skip() {
	printf 'SKIP: %s\n' "$*"
	exit 77
}

cr_pass() {
	printf 'PASS: %s\n' "$*"
	exit 0
}

# Show the tail of a job's stderr, the usual evidence of a failure.
cr_show() {
	local name=$1 f
	for f in "$CR_TMP/$name.out" "$CR_TMP/$name.err"; do
		[[ -s $f ]] || continue
		printf -- '--- %s (last 25 lines)\n' "$f"
		tail -n 25 "$f"
	done
	printf -- '---\n'
}

# The exit trap: no job may outlive the test, and the temporary directory
# goes away only on success or skip (on failure it is the evidence).
cr_cleanup() {
	local status=$? name
	trap - EXIT
	for name in "${CR_JOBS[@]}"; do
		if cr_alive "$name"; then cr_kill_quiet "$name" || true; fi
	done
	for name in "${CR_AT_EXIT[@]}"; do eval "$name" || true; done
	if [[ -n $CR_TMP && -d $CR_TMP ]]; then
		if [[ ($status == 0 || $status == 77) && ${CR_KEEP_TMP:-0} != 1 ]]; then
			rm -rf "$CR_TMP"
		else
			printf 'kept %s\n' "$CR_TMP"
		fi
	fi
	exit "$status"
}

# cr_setup: check the tools, make the temporary directory, set the stasis
# environment every test shares. Skips when stasis is not built yet.
cr_setup() {
	[[ -n ${STASIS_BUILD:-} ]] || cr_skip "STASIS_BUILD is not set"
	CR_STASIS_RUN=${CR_STASIS_RUN:-$STASIS_BUILD/tools/stasis-run}
	CR_STASIS_RESTART=${CR_STASIS_RESTART:-$STASIS_BUILD/tools/stasis-restart}
	[[ -x $CR_STASIS_RUN ]] || cr_skip "$CR_STASIS_RUN is missing (stasis not built)"
	[[ -x $CR_STASIS_RESTART ]] || cr_skip "$CR_STASIS_RESTART is missing (stasis not built)"
	command -v mpirun >/dev/null || cr_skip "mpirun not found"

	CR_TMP=$(mktemp -d "${TMPDIR:-/tmp}/stasis-cr.XXXXXX")
	trap cr_cleanup EXIT
	# Jobs run in sessions of their own, out of reach of a signal meson
	# sends on timeout to the test's group: turn it into an exit, so the
	# trap above kills them.
	trap 'exit 143' TERM INT HUP
	mkdir -p "$CR_TMP/ckpt" "$CR_TMP/tmp"

	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	# Open MPI's session directory goes inside CR_TMP: a SIGKILLed mpirun
	# cannot remove its own, and this way cleanup removes it.
	export TMPDIR=$CR_TMP/tmp
	export STASIS_DIR=$CR_TMP/ckpt
	export STASIS_SCHEME=single
	export STASIS_VERBOSE=1
	export STASIS_INTERVAL=${STASIS_INTERVAL:-0.5}
	unset STASIS_FAULT STASIS_KEEP
	cr_say "temporary directory $CR_TMP, $CR_NP ranks, STASIS_INTERVAL=$STASIS_INTERVAL, launcher ${CR_LAUNCHER:-mpirun}"
}

# cr_track_by_memory: the tracking policy weighs a fault's cost, timed at
# start, against a page's; on a loaded or virtual machine the timing can
# make it save all memory whole, and a test of chains would see none. A
# fault taken as free (STASIS_TRACK_FAULT_US=0) makes the policy's choices
# depend on the memory alone (memory/track_policy.h).
cr_track_by_memory() {
	export STASIS_TRACK_FAULT_US=0
}

# cr_app NAME [ARGS...]: the program every later run uses. Without ARGS,
# the default size for NAME.
cr_app() {
	local name=$1
	shift
	CR_APP=$STASIS_BUILD/tests/apps/$name
	[[ $name == */* ]] && CR_APP=$name
	[[ -x $CR_APP ]] || cr_fail "test program $CR_APP is missing"
	if (($# > 0)); then
		CR_ARGS=("$@")
	else
		read -r -a CR_ARGS <<<"$(cr_default_args "$(basename "$name")")"
	fi
	cr_say "program: $CR_APP ${CR_ARGS[*]}"
}

# The launch command: Open MPI's mpirun (or CR_LAUNCHER), or MPICH's hydra
# (mpiexec.mpich, mpiexec.hydra), which oversubscribes without a flag.
cr_mpirun() {
	case ${CR_LAUNCHER:-mpirun} in
	*.mpich | *.hydra) echo "$CR_LAUNCHER" -n "$CR_NP" ;;
	*) echo "${CR_LAUNCHER:-mpirun}" --oversubscribe -np "$CR_NP" ;;
	esac
}

# --- jobs -----------------------------------------------------------------

# cr_start NAME CMD...: start CMD in the background as the leader of a new
# session and process group, stdin from /dev/null, stdout/stderr to files.
# setsid does not fork here (a background child of a non-interactive shell
# is no group leader), so $! is the session id. CR_JOB in the environment
# marks every process of the job, including ranks that would leave the
# session.
cr_start() {
	local name=$1
	shift
	: >"$CR_TMP/$name.out"
	: >"$CR_TMP/$name.err"
	setsid env CR_JOB="$CR_TMP/$name" "$@" <"${CR_STDIN:-/dev/null}" >"$CR_TMP/$name.out" 2>"$CR_TMP/$name.err" &
	CR_PID[$name]=$!
	CR_JOBS+=("$name")
	unset "CR_STATUS[$name]"
}

# cr_alive NAME: the job's leader has not exited (zombies count as exited).
# Once reaped, its pid may belong to someone else: never look again.
cr_alive() {
	[[ -z ${CR_STATUS[$1]:-} ]] && cr_live "${CR_PID[$1]}"
}

# cr_job_pids NAME: live processes of the job: carrying its CR_JOB mark, or
# in its session while the leader is unreaped (after that, the session id
# is a pid the kernel may hand to an unrelated process).
cr_job_pids() {
	local name=$1
	{
		cr_session_pids "$name"
		# grep fails for nothing found, and for a process gone meanwhile.
		{ grep -lzxF "CR_JOB=$CR_TMP/$name" /proc/[0-9]*/environ 2>/dev/null || true; } | cut -d/ -f3
	} | sort -un | while read -r pid; do
		# Not "cr_live && echo": a last pid gone would make the loop,
		# and under set -e the caller's assignment, fail.
		if cr_live "$pid"; then echo "$pid"; fi
	done
}

# cr_session_pids NAME: live processes in the job's session (none once the
# leader is reaped), found by bash alone: no process started, so that it
# is quick on two cores loaded by the job's spinning threads, where a scan
# that forked per process took 8 s and the kill landed 16 checkpoints
# after the test asked for it.
cr_session_pids() {
	local sid=${CR_PID[$1]} p stat fields
	[[ -z ${CR_STATUS[$1]:-} ]] || return 0
	for p in /proc/[0-9]*; do
		read -r stat 2>/dev/null <"$p/stat" || continue
		read -r -a fields <<<"${stat##*) }"
		[[ ${fields[3]} == "$sid" && ${fields[0]} != Z && ${p#/proc/} != "$$" ]] && echo "${p#/proc/}"
	done
	return 0
}

# cr_live PID: PID is a process that has not exited (bash alone).
cr_live() {
	local stat
	[[ $1 != "$$" ]] && read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}

# cr_reap NAME: collect the leader's exit status into CR_STATUS[NAME].
cr_reap() {
	local name=$1 st=0
	[[ -n ${CR_STATUS[$name]:-} ]] && return 0
	wait "${CR_PID[$name]}" 2>/dev/null || st=$?
	CR_STATUS[$name]=$st
}

# cr_stacks NAME: where every process of a job that hangs is (with gdb,
# when the machine has it), for the log of a failed test.
cr_stacks() {
	local pid
	command -v gdb >/dev/null || return 0
	for pid in $(cr_job_pids "$1"); do
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$CR_APP" ]] || continue
		echo "--- stacks of $1, pid $pid"
		timeout 60 gdb -p "$pid" -batch -nx -ex 'thread apply all bt 20' 2>/dev/null |
			grep -E '^(Thread|#)' | head -80
	done
}

# cr_kill_quiet NAME: SIGKILL every process of the job until none is left
# (a process forked while the kill is under way is caught by the next
# round). Returns 1 if some survived 10 s of trying.
cr_kill_quiet() {
	local name=$1 pid=${CR_PID[$1]} pids i fd
	# bash reports "Killed" for a background job that dies of a signal when
	# it reaps it; the kill is intended, so keep that out of the log.
	exec {fd}>&2 2>/dev/null
	# Open MPI puts every rank in a process group of its own, so killing
	# the group of mpirun alone would leave the ranks running, orphaned.
	# Find them all first and send one kill, so they die together.
	# The session first, found without starting a process: the loop below
	# catches the rest (ranks that left the session, by their CR_JOB mark).
	local -a first=()
	if [[ -z ${CR_STATUS[$name]:-} ]]; then
		cr_session_pids "$name" >"$CR_TMP/$name.session"
		mapfile -t first <"$CR_TMP/$name.session"
		kill -9 -- "-$pid" "$pid" "${first[@]}" 2>/dev/null || true
	fi
	for ((i = 0; i < 100; i++)); do
		pids=$(cr_job_pids "$name")
		[[ -z $pids ]] && break
		# shellcheck disable=SC2086
		kill -9 $pids 2>/dev/null || true
		sleep 0.1
	done
	cr_reap "$name"
	exec 2>&"$fd" {fd}>&-
	[[ -z $(cr_job_pids "$name") ]]
}

# cr_kill NAME: the failure being simulated: SIGKILL the whole job at once.
cr_kill() {
	local name=$1
	if ! cr_alive "$name"; then
		cr_reap "$name"
		cr_show "$name"
		cr_fail "job $name exited (status ${CR_STATUS[$name]}) before it could be killed"
	fi
	cr_kill_quiet "$name" || cr_fail "processes of job $name survive SIGKILL: $(cr_job_pids "$name" | tr '\n' ' ')"
	cr_ok "killed job $name with SIGKILL, no process left"
}

# cr_wait_exit NAME [TIMEOUT]: wait until the job ends; its status goes to
# CR_STATUS[NAME]. On timeout the job is killed and the test fails.
cr_wait_exit() {
	local name=$1 timeout=${2:-$CR_TIMEOUT} deadline left
	deadline=$((SECONDS + timeout))
	while cr_alive "$name"; do
		if ((SECONDS >= deadline)); then
			cr_stacks "$name"
			cr_kill_quiet "$name" || true
			cr_show "$name"
			cr_fail "job $name still running after ${timeout}s"
		fi
		sleep 0.1
	done
	cr_reap "$name"
	# mpirun is gone; nothing of the job may linger (a rank left behind
	# would keep writing checkpoint files under a later job).
	left=$(cr_job_pids "$name")
	if [[ -n $left ]]; then
		cr_kill_quiet "$name" || true
		cr_fail "job $name exited but left processes behind: ${left//$'\n'/ }"
	fi
}

# cr_wait_line NAME REGEX [TIMEOUT]: wait until the job's stderr has a line
# matching REGEX (grep -E). Fails if the job exits first or on timeout.
cr_wait_line() {
	local name=$1 re=$2 timeout=${3:-$CR_TIMEOUT} deadline
	deadline=$((SECONDS + timeout))
	until grep -qE -- "$re" "$CR_TMP/$name.err"; do
		if ! cr_alive "$name"; then
			grep -qE -- "$re" "$CR_TMP/$name.err" && break
			cr_reap "$name"
			cr_show "$name"
			cr_fail "job $name exited (status ${CR_STATUS[$name]}) before printing /$re/"
		fi
		if ((SECONDS >= deadline)); then
			cr_show "$name"
			cr_fail "job $name did not print /$re/ within ${timeout}s"
		fi
		sleep 0.05
	done
}

CR_COMMIT_RE='stasis(\[[0-9]+\])?: checkpoint [0-9]+ committed'

# cr_commits NAME: number of checkpoints the job has committed so far.
cr_commits() {
	grep -cE -- "$CR_COMMIT_RE" "$CR_TMP/$1.err" || true
}

# cr_last_commit NAME: id of the last checkpoint the job committed.
cr_last_commit() {
	grep -oE -- "$CR_COMMIT_RE" "$CR_TMP/$1.err" | tail -n 1 | sed -E 's/.*checkpoint ([0-9]+) committed/\1/'
}

# cr_wait_commits NAME N: wait until the job has committed N checkpoints.
cr_wait_commits() {
	local name=$1 n=$2 timeout=${3:-$CR_TIMEOUT} deadline
	deadline=$((SECONDS + timeout))
	while (($(cr_commits "$name") < n)); do
		if ! cr_alive "$name"; then
			(($(cr_commits "$name") >= n)) && break
			cr_reap "$name"
			cr_show "$name"
			cr_fail "job $name exited (status ${CR_STATUS[$name]}) after $(cr_commits "$name") of $n checkpoints"
		fi
		if ((SECONDS >= deadline)); then
			cr_show "$name"
			cr_fail "job $name committed $(cr_commits "$name") of $n checkpoints in ${timeout}s"
		fi
		sleep 0.05
	done
	cr_ok "job $name committed $n checkpoint(s), last id $(cr_last_commit "$name")"
}

# --- the runs ---------------------------------------------------------------

# cr_iters_index: index in CR_ARGS of the iteration count, the second
# positional argument of every test program ("" if there is none).
cr_iters_index() {
	local i pos=0
	for ((i = 0; i < ${#CR_ARGS[@]}; i++)); do
		[[ ${CR_ARGS[i]} == -* ]] && continue
		pos=$((pos + 1))
		if ((pos == 2)); then
			[[ ${CR_ARGS[i]} =~ ^[0-9]+$ ]] && echo "$i"
			return 0
		fi
	done
}

# cr_reference [MIN_SECONDS]: the uninterrupted run without stasis, into
# ref.out. CR_REF_MS is its duration in milliseconds.
#
# A job under stasis must live long enough for the checkpoints a test
# waits for, whatever the machine's speed (a faster machine with more cores
# ran the fixed sizes in under 2 s and ended before the second checkpoint).
# So when the run takes less than MIN_SECONDS (default 4), the iteration
# count is scaled up and the run repeated: every later run uses the new
# count, and the output to match is that of the longer run. From the second
# run on, the count comes from a line through the last two (time = start-up
# + count * per iteration): mpirun's start-up, over a second here, made
# scaling by the ratio of times fall short four times in a row.
#
# A count an earlier test of this build settled on, for the same program,
# arguments, rank count and minimum, is the starting point (it saved a
# third of the suite's reference runs).
#
# Shared reference runs: the uninterrupted output of the same program
# binary, arguments (and the files they name), rank count, launcher and
# OMP_NUM_THREADS, run by an earlier test of this build, is used instead of
# running it again (it printed the same then; harness.sh checks that two
# runs agree). CR_REF_SHARED=0 runs it anyway: for tests that need the
# run's side effects (files it wrote) or two runs.
cr_reference() {
	local min_ms=$((${1:-4} * 1000)) t0 at old try cache="" cached key shared="" ms
	local -a before=() # the previous run's iterations and ms, once there is one
	at=$(cr_iters_index)
	if [[ -n $at ]]; then
		key=("${CR_ARGS[@]}")
		key[at]=N
		key=$(printf '%s\n' "$(basename "$CR_APP")" "${key[@]}" "np=$CR_NP" "min=$min_ms" \
			"omp=${OMP_NUM_THREADS:-}" | cksum | cut -d' ' -f1)
		cache=$STASIS_BUILD/cr-sizes/$key
		if [[ -r $cache ]] && read -r cached <"$cache" && [[ $cached =~ ^[0-9]+$ ]] &&
			((cached > CR_ARGS[at])); then
			cr_say "iterations ${CR_ARGS[at]} -> $cached (the count an earlier test measured)"
			CR_ARGS[at]=$cached
		fi
	fi
	for ((try = 1; ; try++)); do
		[[ ${CR_REF_SHARED:-1} == 0 ]] || shared=$STASIS_BUILD/cr-refs/$(cr_reference_key)
		if [[ -n $shared && -s $shared.out && -r $shared.ms ]] && read -r ms <"$shared.ms" &&
			[[ $ms =~ ^[0-9]+$ ]] && ((ms >= min_ms)); then
			cp "$shared.out" "$CR_TMP/ref.out"
			CR_REF_MS=$ms
			cr_ok "uninterrupted run: shared, by an earlier test of this build ($((ms / 1000)).$(printf '%03d' $((ms % 1000)))s): $(cat "$CR_TMP/ref.out")"
			break
		fi
		t0=$(date +%s%3N)
		# shellcheck disable=SC2046
		cr_start ref $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
		cr_wait_exit ref
		CR_REF_MS=$(($(date +%s%3N) - t0))
		cr_expect_status ref 0
		[[ -s $CR_TMP/ref.out ]] || cr_fail "uninterrupted run printed nothing"
		cr_ok "uninterrupted run took $((CR_REF_MS / 1000)).$(printf '%03d' $((CR_REF_MS % 1000)))s: $(cat "$CR_TMP/ref.out")"
		if [[ -n $shared ]] && mkdir -p "${shared%/*}"; then
			cp "$CR_TMP/ref.out" "$shared.out.$$" && mv -f "$shared.out.$$" "$shared.out"
			echo "$CR_REF_MS" >"$shared.ms"
		fi
		((CR_REF_MS >= min_ms || try == 6)) && break
		at=$(cr_iters_index)
		if [[ -z $at ]]; then
			cr_say "note: shorter than $((min_ms / 1000))s and no iteration count to scale in: ${CR_ARGS[*]}"
			break
		fi
		old=${CR_ARGS[at]}
		if ((${#before[@]})); then
			CR_ARGS[at]=$(cr_scale_iterations "$((min_ms * 3 / 2))" "${before[0]}" "$old" "${before[1]}" "$CR_REF_MS")
		else
			CR_ARGS[at]=$(cr_scale_iterations "$((min_ms * 3 / 2))" "$old" "$CR_REF_MS")
		fi
		before=("$old" "$CR_REF_MS")
		cr_say "too short for the checkpoints to come (< $((min_ms / 1000))s): iterations $old -> ${CR_ARGS[at]}"
	done
	if [[ -n $cache ]] && mkdir -p "${cache%/*}"; then
		echo "${CR_ARGS[at]}" >"$cache.$$" && mv -f "$cache.$$" "$cache"
	fi
}

# cr_scale_iterations TARGET_MS N T | TARGET_MS N1 N2 T1 T2: an iteration
# count for a run of about TARGET_MS, from the last one or two runs (N
# iterations took T ms). One: by the ratio of times after a start-up of
# half the run, at most 600 ms (mpirun and MPI_Init: measured 0.5 to 0.8 s
# on the suite's programs; by the plain ratio a run of 1.5 s grew too
# little and a second one was needed, 33 times in a full suite). Two: by
# the line through them, which leaves the start-up out. At least twice the
# last count (progress), at most 16 times from one run, 8 from two (too
# close to fit well).
cr_scale_iterations() {
	local target=$1 n last most=8 start
	shift
	if (($# == 4)); then
		last=$2 n=0
		(($2 > $1 && $4 > $3)) && n=$(((target - $3) * ($2 - $1) / ($4 - $3) + $1))
	else
		last=$1 most=16 start=$(($2 / 2))
		((start <= 600)) || start=600
		n=$(($1 * (target - start) / ($2 - start)))
	fi
	((n >= last * 2)) || n=$((last * 2))
	((n <= last * most)) || n=$((last * most))
	echo "$n"
}

# cr_reference_key: the name of the shared reference run of CR_APP and
# CR_ARGS: a checksum of the program, the arguments and the files they
# name, the test programs' libraries, the rank count, the launcher and
# OMP_NUM_THREADS.
cr_reference_key() {
	local a
	{
		printf '%s\n' "$(basename "$CR_APP")" "${CR_ARGS[@]}" "np=$CR_NP" "omp=${OMP_NUM_THREADS:-}" \
			"$(cr_mpirun)"
		cksum "$(command -v "$CR_APP")"
		for a in "${CR_ARGS[@]}"; do
			[[ -f $a ]] && cksum "$a"
		done
		cat "$STASIS_BUILD"/tests/apps/*.so 2>/dev/null | cksum
	} | cksum | cut -d' ' -f1
}

# cr_run NAME: start the program under stasis-run in the background.
cr_run() {
	# shellcheck disable=SC2046
	cr_start "$1" "$CR_STASIS_RUN" $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
}

# cr_restart_bg NAME: start stasis-restart with the same command.
cr_restart_bg() {
	# shellcheck disable=SC2046
	cr_start "$1" "$CR_STASIS_RESTART" $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
}

# cr_restart NAME: stasis-restart to completion; status in CR_STATUS[NAME].
cr_restart() {
	cr_restart_bg "$1"
	cr_wait_exit "$1"
}

# cr_run_wait NAME: stasis-run to completion; status in CR_STATUS[NAME].
cr_run_wait() {
	cr_run "$1"
	cr_wait_exit "$1"
}

# --- checks -----------------------------------------------------------------

cr_expect_status() {
	local name=$1 want=$2
	if [[ ${CR_STATUS[$name]} != "$want" ]]; then
		cr_show "$name"
		cr_fail "job $name exited with status ${CR_STATUS[$name]}, expected $want"
	fi
}

cr_expect_failure() {
	local name=$1
	if [[ ${CR_STATUS[$name]} == 0 ]]; then
		cr_show "$name"
		cr_fail "job $name succeeded but should have failed"
	fi
	cr_ok "job $name failed as expected (status ${CR_STATUS[$name]})"
}

# cr_expect_same NAME: the job's stdout equals the uninterrupted run's, byte
# for byte.
cr_expect_same() {
	local name=$1
	if ! cmp -s "$CR_TMP/ref.out" "$CR_TMP/$name.out"; then
		diff -u "$CR_TMP/ref.out" "$CR_TMP/$name.out" || true
		cr_show "$name"
		cr_fail "output of job $name differs from the uninterrupted run"
	fi
	cr_ok "output of job $name is identical to the uninterrupted run"
}

# cr_expect_line NAME REGEX WHAT [GREP-FLAG]: the job's stderr has a
# matching line.
cr_expect_line() {
	local name=$1 re=$2 what=$3 flag=${4:-} line
	line=$(grep $flag -E -m 1 -- "$re" "$CR_TMP/$name.err") || {
		cr_show "$name"
		cr_fail "stderr of job $name has no line for $what (/$re/${flag:+, any case})"
	}
	cr_ok "$what: $line"
}

# cr_expect_line_ci: the same, case-insensitive.
cr_expect_line_ci() {
	cr_expect_line "$1" "$2" "$3" -i
}

# --- checkpoint files -------------------------------------------------------

# cr_snapshot FILE [DIR]: every file under DIR (default STASIS_DIR) with
# its sha256, sorted; files named CR_SNAPSHOT_SKIP (a find -name pattern,
# default none) left out.
cr_snapshot() {
	(cd "${2:-$STASIS_DIR}" && find . -type f ! -name "${CR_SNAPSHOT_SKIP:-}" -exec sha256sum {} + |
		sort -k 2) >"$1"
}

# cr_expect_unchanged BEFORE [DIR]: DIR (default STASIS_DIR) holds exactly
# the files of the snapshot BEFORE, with the same contents: an error lost
# nothing.
cr_expect_unchanged() {
	local before=$1 dir=${2:-$STASIS_DIR} after
	after=$(mktemp "$CR_TMP/snapshot.XXXXXX")
	cr_snapshot "$after" "$dir"
	if ! cmp -s "$before" "$after"; then
		diff -u "$before" "$after" || true
		cr_fail "checkpoint files changed (lost, added or modified) in $dir"
	fi
	cr_ok "no checkpoint file was lost or changed ($(wc -l <"$before") files)"
}

# cr_flip_byte FILE: invert every bit of the byte in the middle of FILE,
# region data in an image (covered by a data checksum, where a byte of
# header padding might legitimately go unnoticed).
cr_flip_byte() {
	local file=$1 size off old
	size=$(stat -c %s "$file")
	off=$((size / 2))
	old=$(od -An -tu1 -j "$off" -N1 "$file" | tr -d ' ')
	printf '%b' "\\0$(printf '%03o' $(((old ^ 0xff) & 0xff)))" |
		dd of="$file" bs=1 seek="$off" count=1 conv=notrunc status=none
	cr_ok "flipped all bits of byte $off of $file ($size bytes)"
}

# cr_newest_complete: id of the newest checkpoint with a commit record.
cr_newest_complete() {
	find "$STASIS_DIR" -name 'ckpt-*.r*.done' -printf '%f\n' |
		sed -E 's/^ckpt-([0-9]+)\.r.*/\1/' | sort -n | tail -n 1
}

# cr_kill_restart_same N: the round trip of most tests. Run under stasis
# as job run, kill it after N commits, restart it as job restart: it must
# exit 0, resume from the newest complete checkpoint and print what the
# uninterrupted run printed. Sets CR_NEWEST.
cr_kill_restart_same() {
	local n=$1
	cr_run run
	cr_wait_commits run "$n"
	cr_kill run
	CR_NEWEST=$(cr_newest_complete)
	[[ -n $CR_NEWEST ]] || cr_fail "no complete checkpoint on disk after $n commits"
	cr_restart restart
	cr_expect_status restart 0
	cr_expect_line restart "resumed from checkpoint $CR_NEWEST\\b" \
		"restart resumed from the newest complete checkpoint ($CR_NEWEST)"
	cr_expect_same restart
}

# cr_ckpt_file ID RANK EXT: path of one checkpoint file, "" if absent.
cr_ckpt_file() {
	find "$STASIS_DIR" -name "ckpt-$1.r$2.$3" | head -n 1
}

# cr_prepare_checkpoints N: run under stasis, kill after N commits. Leaves
# the checkpoint files for the error cases; sets CR_NEWEST.
cr_prepare_checkpoints() {
	local n=${1:-2}
	cr_run prep
	cr_wait_commits prep "$n"
	cr_kill prep
	CR_NEWEST=$(cr_newest_complete)
	[[ -n $CR_NEWEST ]] || cr_fail "no commit record (ckpt-*.done) under $STASIS_DIR after $n commits"
	cr_ok "newest complete checkpoint on disk: $CR_NEWEST"
}

# cr_expect_words NAME WHAT RE...: one line of the job's stderr matches every
# extended regex RE (case-insensitive), e.g. stasis + STASIS_INTERVAL + abc.
# Errors are one line naming the cause, so the words must share a line.
cr_expect_words() {
	local name=$1 what=$2 line
	shift 2
	# Through the environment, not -v, which would eat backslashes.
	line=$(CR_RES=$(printf '%s\n' "$@") awk -v n=$# '
		BEGIN { split(ENVIRON["CR_RES"], re, "\n") }
		{ l = tolower($0); for (i = 1; i <= n; i++) if (l !~ tolower(re[i])) next; print; exit }
	' "$CR_TMP/$name.err")
	if [[ -z $line ]]; then
		cr_show "$name"
		cr_fail "stderr of job $name has no line with all of: $* ($what)"
	fi
	cr_ok "$what: $line"
}
