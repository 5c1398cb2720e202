#!/bin/bash
# kill_restart.sh restart|rebuild [APP [ARGS...]]: SIGKILL a restart at
# random instants, CR_TRIALS times (10; 60 in the soak suite), each followed
# by a restart that must resume from the newest complete checkpoint on disk
# and give the uninterrupted output.
#   restart  the kill lands anywhere from the launch of stasis-restart to
#            the first checkpoint the restarted job commits: while it
#            agrees, reads and verifies, restores memory, or writes that
#            checkpoint.
#   rebuild  2 ranks on 2 simulated nodes, xor: before each trial the
#            files of node 1 are deleted, so every restart first rebuilds
#            them from the other node's redundancy file; the kill lands
#            anywhere from the launch to the first commit, most often in
#            the rebuild. Nothing a rebuild wrote may be trusted unchecked.
# Each trial starts from the same checkpoints, taken near the end of the
# run so that a trial's restarts are short. The kill window is measured
# first, by one restart timed up to its first commit. CR_SEED reproduces.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: kill_restart.sh restart|rebuild [APP [ARGS...]]}
shift
export CR_NP=2
cr_setup
if [[ $mode == rebuild ]]; then
	export STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=1 STASIS_SET_SIZE=2
	export STASIS_DIR=$CR_TMP/ckpt/node%n
fi
root=$CR_TMP/ckpt
export STASIS_INTERVAL=0.05
# A small grid: the job's own work is not what is tested here, its
# restarts are.
if (($# > 0)); then cr_app "$@"; else cr_app heat 256 4000; fi
trials=${CR_TRIALS:-10}
seed=${CR_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$seed
cr_say "mode $mode, $trials trials, seed $seed (rerun with CR_SEED=$seed)"

# Checkpoints near the end: a whole run with one every 0.1 s, keeping 7,
# less its four newest. What is left after the newest kept one is four or
# five intervals of work (fewer CPU seconds on a loaded machine), so a
# trial's restarts are short and still reach a checkpoint of their own
# (every 0.05 s). The job must take at least 7 checkpoints: on a quick
# machine its iterations double until it does (sized by counting them, not
# by a guess of its speed).
for ((try = 1; ; try++)); do
	cr_reference 0
	STASIS_INTERVAL=0.1 STASIS_KEEP=7 cr_run_wait prep
	cr_expect_status prep 0
	cr_expect_same prep
	(($(cr_commits prep) >= 7)) && break
	((try < 6)) || cr_fail "the job took $(cr_commits prep) checkpoints after $try tries"
	at=$(cr_iters_index)
	CR_ARGS[at]=$((CR_ARGS[at] * 2))
	cr_say "$(cr_commits prep) checkpoints, 7 needed: iterations -> ${CR_ARGS[at]}"
	rm -rf "${root:?}"/*
done
for drop in 1 2 3 4; do
	id=$(STASIS_DIR=$root cr_newest_complete)
	find "$root" -name "ckpt-$id.*" -delete
done
saved=$CR_TMP/saved
cp -a "$root" "$saved"
prepared=$(STASIS_DIR=$root cr_newest_complete)
cr_ok "checkpoints saved, newest complete $prepared"

# Put the saved checkpoints back (and, for rebuild, lose node 1).
reset() {
	rm -rf "$root"
	cp -a "$saved" "$root"
	[[ $mode == rebuild ]] && rm -rf "$root/node1"
	return 0
}

newest() { STASIS_DIR=$root cr_newest_complete; }

# SIGKILL every process in the job's session at once, found by reading
# /proc with builtins only (cr_kill_quiet's thorough search forks per
# process and would land the kill much later than the instant chosen; it
# runs after, to make sure nothing is left).
strike() {
	local sid=${CR_PID[$1]} p st f pids=()
	for p in /proc/[0-9]*/stat; do
		read -r st 2>/dev/null <"$p" || continue
		read -r -a f <<<"${st##*) }"
		[[ ${f[3]} == "$sid" && ${f[0]} != Z ]] && { p=${p#/proc/}; pids+=("${p%/stat}"); }
	done
	((${#pids[@]} == 0)) || kill -9 "${pids[@]}" 2>/dev/null || true
}

# The window: from the launch to the first commit of the restarted job.
reset
t0=$(date +%s%3N)
cr_restart_bg window
cr_wait_line window "$CR_COMMIT_RE"
window_ms=$(($(date +%s%3N) - t0))
cr_kill window
[[ $mode == restart ]] || cr_expect_line window 'rebuilt lost or damaged images' "the timed restart rebuilt node 1's files"
cr_ok "kill window: ${window_ms} ms from launch to the first commit"

phases=()
for ((t = 1; t <= trials; t++)); do
	reset
	ms=$(((RANDOM * 32768 + RANDOM) % (window_ms + 1)))
	cr_restart_bg "k$t"
	sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
	if cr_alive "k$t"; then
		strike "k$t"
		cr_kill_quiet "k$t" || cr_fail "trial $t: processes survive SIGKILL"
	else
		cr_reap "k$t"
	fi
	# How far the killed restart got, from what it printed.
	phase=launch
	grep -q 'rebuilding' "$CR_TMP/k$t.err" && phase=rebuild
	grep -q 'resumed from checkpoint' "$CR_TMP/k$t.err" && phase=resumed
	grep -qE "$CR_COMMIT_RE" "$CR_TMP/k$t.err" && phase=committed
	phases+=("$phase")
	want=$(newest)
	[[ -n $want ]] || cr_fail "trial $t: no complete checkpoint left after a kill at +${ms} ms"
	cr_restart "r$t"
	if [[ ${CR_STATUS[r$t]} != 0 ]] || ! cmp -s "$CR_TMP/ref.out" "$CR_TMP/r$t.out" ||
		! grep -qE "resumed from checkpoint $want\\b" "$CR_TMP/r$t.err"; then
		cr_show "k$t"
		cr_show "r$t"
		cr_fail "trial $t: after a kill at +${ms} ms ($phase), the restart did not resume from $want with the uninterrupted output"
	fi
	cr_ok "trial $t: killed at +${ms} ms ($phase), resumed from $want, same output"
done
cr_say "where the kills landed: $(printf '%s\n' "${phases[@]}" | sort | uniq -c | tr -s ' \n' ' ')"
cr_pass "$trials kills during $mode (seed $seed): every further restart resumed with the uninterrupted output"
