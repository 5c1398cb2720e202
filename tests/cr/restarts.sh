#!/bin/bash
# restarts.sh: stasis-run --restarts N relaunches a failed job from its
# newest complete checkpoint, up to N times, and says so in a line per
# relaunch; it exits with the status of the last launch.
#   1. --restarts 2: one rank SIGKILLed after the first commit (mpirun ends
#      the job), then, once the relaunched job has resumed and committed,
#      mpirun and every rank SIGKILLed: two relaunches, and the job ends
#      with the uninterrupted run's output and status 0.
#   2. --restarts 1 and the same two kills: one relaunch, then it gives up
#      with the killed launcher's status, no third launch, no output.
#   3. A job killed before its first checkpoint was committed is not
#      relaunched (a failure that has nothing to resume from).
#   4. A bad --restarts value is a usage error (status 2), nothing runs.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app heat
cr_reference

# kill_launch NAME WHAT: SIGKILL processes of the job but not the
# stasis-run script (the job's leader), as a node or process failure would.
# WHAT: "one-rank" (one rank only) or "all" (mpirun and every rank).
kill_launch() {
	local name=$1 what=$2 pids=() p comm
	for p in $(cr_job_pids "$name"); do
		[[ $p == "${CR_PID[$name]}" ]] && continue
		comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		case $what:$comm in
		one-rank:heat) pids=("$p") && break ;;
		all:heat | all:mpirun | all:orterun | all:setarch) pids+=("$p") ;;
		esac
	done
	((${#pids[@]})) || cr_fail "no process of job $name to kill ($what)"
	kill -9 "${pids[@]}" 2>/dev/null || true
	cr_ok "SIGKILLed $what of job $name: ${pids[*]}"
}

# relaunches NAME: relaunch lines so far.
relaunches() { grep -cE '^stasis-run: .*relaunch [0-9]+ of' "$CR_TMP/$1.err" || true; }

# wait_for NAME COUNT REGEX: until COUNT lines of the job's stderr match.
wait_for() {
	local name=$1 count=$2 re=$3 deadline=$((SECONDS + CR_TIMEOUT))
	until (($(grep -cE -- "$re" "$CR_TMP/$name.err" || true) >= count)); do
		cr_alive "$name" || {
			cr_show "$name"
			cr_fail "job $name ended before $count lines /$re/"
		}
		((SECONDS < deadline)) || cr_fail "job $name: no $count lines /$re/ in ${CR_TIMEOUT}s"
		sleep 0.05
	done
}

# two_kills NAME: the first commit, kill one rank; the relaunch resumes and
# commits, kill everything.
two_kills() {
	local name=$1
	cr_wait_commits "$name" 1
	kill_launch "$name" one-rank
	wait_for "$name" 1 'resumed from checkpoint'
	cr_wait_commits "$name" 2
	kill_launch "$name" all
}

# --- 1 ----------------------------------------------------------------------
# shellcheck disable=SC2046
cr_start survive "$CR_STASIS_RUN" --restarts 2 $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
two_kills survive
cr_wait_exit survive
cr_expect_status survive 0
cr_expect_same survive
cr_expect_line survive '^stasis-run: the job failed \(exit status [0-9]+\): relaunch 1 of 2' "first relaunch"
cr_expect_line survive '^stasis-run: the job failed \(exit status [0-9]+\): relaunch 2 of 2' "second relaunch"
cr_expect_line survive '^stasis-run: the job completed after 2 relaunch' "completion after two relaunches"
(($(relaunches survive) == 2)) || cr_fail "$(relaunches survive) relaunches, 2 expected"
(($(grep -c 'resumed from checkpoint' "$CR_TMP/survive.err") == 2)) ||
	cr_fail "not resumed twice: $(grep 'resumed from checkpoint' "$CR_TMP/survive.err" | tr '\n' ' ')"

# --- 2 ----------------------------------------------------------------------
# shellcheck disable=SC2046
cr_start giveup "$CR_STASIS_RUN" --restarts 1 $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
two_kills giveup
cr_wait_exit giveup
cr_expect_failure giveup
cr_expect_line giveup '^stasis-run: the job failed \(exit status [0-9]+\) after 1 relaunch\(es\), the most --restarts 1 allows: giving up' "giving up after N"
status=$(grep -oE 'failed \(exit status [0-9]+\) after 1' "$CR_TMP/giveup.err" | grep -oE '[0-9]+' | head -n 1)
[[ ${CR_STATUS[giveup]} == "$status" ]] || cr_fail "stasis-run exited ${CR_STATUS[giveup]}, the last launch $status"
(($(relaunches giveup) == 1)) || cr_fail "$(relaunches giveup) relaunches with --restarts 1"
[[ ! -s $CR_TMP/giveup.out ]] || cr_fail "a third launch ran the program to its end"
cr_ok "gave up after one relaunch with the launcher's status $status"

# --- 3 ----------------------------------------------------------------------
# shellcheck disable=SC2046
STASIS_INTERVAL=600 cr_start early "$CR_STASIS_RUN" --restarts 3 $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
wait_for early 1 'STASIS_DIRTY='
kill_launch early one-rank
cr_wait_exit early
cr_expect_failure early
cr_expect_line early '^stasis-run: the job failed \(exit status [0-9]+\) before its first checkpoint was committed: not relaunched' "no relaunch without a checkpoint"
(($(relaunches early) == 0)) || cr_fail "relaunched a job that had no checkpoint"

# --- 4 ----------------------------------------------------------------------
for bad in abc -1 1001 ''; do
	st=0
	out=$("$CR_STASIS_RUN" --restarts "$bad" mpirun -np 1 true 2>&1) || st=$?
	((st == 2)) || cr_fail "--restarts '$bad': status $st, 2 expected ($out)"
	grep -qE "^stasis-run: --restarts '$bad': expected" <<<"$out" || cr_fail "--restarts '$bad': no line naming it: $out"
done
st=0
out=$("$CR_STASIS_RUN" --bogus mpirun true 2>&1) || st=$?
((st == 2)) && grep -q "unknown option '--bogus'" <<<"$out" || cr_fail "--bogus: status $st: $out"
cr_ok "bad --restarts values and unknown options: status 2 with a line naming them"
cr_pass "--restarts: two kills survived, gave up after N, no relaunch without a checkpoint"
