#!/bin/bash
# restart_perf.sh BUILD_DIR: how long a restart takes to bring back NP ranks
# of MIB MiB each (default 2 x 1 GiB), against the floor measured in the
# same run, rounds alternating:
#   restart  from launching stasis-restart to its "resumed" line, the images
#            dropped from the page cache first (libraries stay warm);
#   floor    an empty MPI job of the same ranks (MPI_Init, MPI_Finalize)
#            + a cold read of the same image files + writing as many bytes
#            into memory populated as huge pages (bench/restore_floor, one
#            process per rank, in parallel; the slowest rank counts).
# Target: restart <= 1.5 x floor. Needs root (drop_caches, then
# posix_fadvise to evict the images between steps).
#
# Memory freed in 2 MiB blocks or more goes back to the host of a VM with
# free page reporting (virtio_balloon, order 9: this machine kind) a
# couple of seconds later; touching it again then costs host faults, up to
# 5-30x slower. Each measured step waits RESTART_PERF_PAUSE seconds first,
# so that the restart and the floor both find memory in that state (as a
# restart after a failure does), and the two alternate which comes first.
#
# Env: RESTART_PERF_NP (2), RESTART_PERF_MIB (1024), RESTART_PERF_ROUNDS (3),
# RESTART_PERF_PAUSE (5).
set -euo pipefail
build=$(cd "${1:?usage: restart_perf.sh BUILD_DIR}" && pwd)
np=${RESTART_PERF_NP:-2}
mib=${RESTART_PERF_MIB:-1024}
rounds=${RESTART_PERF_ROUNDS:-3}
pause=${RESTART_PERF_PAUSE:-5}
app=$build/bench/rewrite
floor=$build/bench/restore_floor
if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
	echo "restart_perf: needs root to drop the page cache: skipped"
	exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
mkdir -p "$dir/tmp"
export TMPDIR=$dir/tmp STASIS_DIR=$dir/ckpt STASIS_SCHEME=single STASIS_KEEP=1 STASIS_VERBOSE=1
unset STASIS_FULL_EVERY STASIS_SHADOW_FULL STASIS_FAULT

# Every process of a job carries BENCH_JOB in its environment: killed by pid.
kill_jobs() {
	local p
	for p in /proc/[0-9]*; do
		grep -qzx "BENCH_JOB=$dir" "$p/environ" 2>/dev/null && kill -9 "${p#/proc/}" 2>/dev/null
	done
	wait 2>/dev/null || true
}
trap 'kill_jobs; [[ -n ${RESTART_PERF_KEEP:-} ]] || rm -rf "$dir"' EXIT
trap 'exit 143' TERM INT HUP
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
now() { date +%s.%N; }

# start NAME CMD...: in the background, stderr to $dir/NAME.err.
start() {
	local name=$1
	shift
	: >"$dir/$name.out"
	: >"$dir/$name.err"
	BENCH_JOB=$dir setsid "$@" </dev/null >"$dir/$name.out" 2>"$dir/$name.err" &
}
# wait_line NAME REGEX PID: until the job prints the line; fails if it exits.
wait_line() {
	until grep -qE "$2" "$dir/$1.err" 2>/dev/null; do
		if ! kill -0 "$3" 2>/dev/null; then
			cat "$dir/$1.err" >&2
			echo "restart_perf: $1 exited before /$2/" >&2
			exit 1
		fi
		sleep 0.01
	done
}

echo "== restart of $np x $mib MiB (bench/apps/rewrite) vs the floor, $rounds rounds; $(uptime)"
STASIS_INTERVAL=2 start run "$build/tools/stasis-run" mpirun --oversubscribe -np "$np" "$app" "$mib" 1000000
wait_line run 'committed' $!
kill_jobs
grep committed "$dir/run.err"
job=$STASIS_DIR/rewrite
images=()
for ((r = 0; r < np; r++)); do images+=("$(ls "$job"/ckpt-*.r$r.img)"); done
echo "images: $(du -ch "${images[@]}" | tail -n 1)"

echo 3 >/proc/sys/vm/drop_caches
mpirun --oversubscribe -np "$np" "$app" 1 1 >/dev/null # libraries into the cache

printf '%-6s %9s %9s %9s %9s %9s %9s   %s\n' round restart_s empty_s read_s copy_s floor_s ratio \
	"restart's slowest rank"
sum=0
# restart_once: seconds from launching stasis-restart to its "resumed"
# line in $restart, where the time went in $breakdown.
restart_once() {
	local t0
	"$floor" --evict "${images[@]}"
	sleep "$pause"
	t0=$(now)
	STASIS_VERBOSE=2 start restart "$build/tools/stasis-restart" mpirun --oversubscribe \
		-np "$np" "$app" "$mib" 1000000
	wait_line restart 'resumed from checkpoint' $!
	restart=$(calc "$(now) - $t0")
	kill_jobs
	# Where the restart's time went (restore_read.c's STASIS_VERBOSE=2 lines,
	# the slowest rank): the cold read, populating, reading into place.
	breakdown=$(awk '/restore: .*: verified in/ { v = $(NF-1); if (v > mv) mv = v }
		/populated the program.s memory in/ { q = $(NF-1); if (q > mq) mq = q }
		/memory read into place in/ { a = $(NF-1); if (a > ma) ma = a }
		END { printf "verify %d ms, populate %d ms, into place %d ms", mv, mq, ma }' "$dir/restart.err")
}

# floor_once: the slowest rank's cold read and populated copy, in $read_s
# and $copy_s.
floor_once() {
	local k
	"$floor" --evict "${images[@]}"
	sleep "$pause"
	for ((k = 0; k < np; k++)); do
		"$floor" "${images[k]}" >"$dir/floor.$k" &
	done
	wait
	read_s=$(awk '/^cold_read_s/ { if ($2 > m) m = $2 } END { print m }' "$dir"/floor.*)
	copy_s=$(awk '/^populated_copy_s/ { if ($2 > m) m = $2 } END { print m }' "$dir"/floor.*)
}

for r in $(seq "$rounds"); do
	sleep "$pause"
	t0=$(now)
	mpirun --oversubscribe -np "$np" "$app" 1 1 >/dev/null
	empty=$(calc "$(now) - $t0")
	if ((r % 2)); then
		restart_once
		floor_once
	else
		floor_once
		restart_once
	fi
	fl=$(calc "$empty + $read_s + $copy_s")
	ratio=$(calc "$restart / $fl")
	sum=$(calc "$sum + $ratio")
	printf '%-6s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f   %s\n' "$r" "$restart" "$empty" "$read_s" \
		"$copy_s" "$fl" "$ratio" "$breakdown"
done
printf 'mean ratio restart/floor: %.2f (target <= 1.5); %s\n' "$(calc "$sum / $rounds")" "$(uptime)"
