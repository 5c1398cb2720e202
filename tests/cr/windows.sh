#!/bin/bash
# windows.sh MODE: tests/apps/windows --MODE (one-sided communication, one
# mode per window kind and synchronisation: windows.c). Run uninterrupted,
# run under stasis-run, SIGKILL the job after two committed checkpoints,
# restart it: the restarted run must resume from the newest checkpoint and
# print what the uninterrupted run printed.
#   long:   at STASIS_VERBOSE=1 the run must also say that a checkpoint
#           waited for a passive-target epoch to end (one was asked for
#           inside the lock the program holds most of the time).
#   pscw:   post/start/complete/wait and nothing else in the loop, asked
#           for a checkpoint every 0.1 s: killed after 6 commits (a rank
#           held where it stops while a peer waits in MPI_Win_start or
#           MPI_Win_complete for its post was a hang: the wait for the
#           commits fails on it).
#   Every mode but shared: no checkpoint was skipped (each epoch ends
#   within a step, so stasis must find a point outside them all).
#   shared: MPI_Win_allocate_shared on the node's ranks, their parts read
#           by the neighbours and put into: the restart maps the segment
#           again, shared; before it, on one rank (where Open MPI makes no
#           window over given memory) the program runs as without stasis,
#           checkpoints off, named.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: windows.sh MODE}
cr_setup
# Iterations near the 4 s cr_reference wants on 2 cores (it grows them
# when short): fewer reference runs.
declare -A iters=([lock]=12000 [dynamic]=15000 [long]=1000 [pscw]=2000 [shared]=8000)
# pscw: a block long enough that much of a step is outside the epochs,
# where a round finds no rank in one.
declare -A sizes=([pscw]=40000)
# Shorter runs where that is enough: pscw's checkpoints come every 0.1 s;
declare -A min_seconds=([pscw]=3)
cr_app windows "--$mode" "${sizes[$mode]:-4000}" "${iters[$mode]:-4000}"
cr_reference "${min_seconds[$mode]:-4}"
CR_SAVED_ARGS=("${CR_ARGS[@]}") CR_SAVED_NP=$CR_NP

# One rank (shared mode, before its round trip): Open MPI 4.1 makes no
# window over given memory on one rank (only osc/sm), where stasis makes
# MPI_Win_allocate's and MPI_Win_allocate_shared's: the program must run as
# without stasis, checkpoints off, named.
if [[ $mode == shared ]]; then
	for kind in fence:MPI_Win_allocate shared:MPI_Win_allocate_shared; do
		CR_NP=1 CR_ARGS=("--${kind%%:*}" 400 200)
		# shellcheck disable=SC2046
		cr_start "plain-${kind%%:*}" $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
		cr_wait_exit "plain-${kind%%:*}"
		cr_expect_status "plain-${kind%%:*}" 0
		cr_run_wait "one-${kind%%:*}"
		cr_expect_status "one-${kind%%:*}" 0
		cmp -s "$CR_TMP/plain-${kind%%:*}.out" "$CR_TMP/one-${kind%%:*}.out" || {
			cr_show "one-${kind%%:*}"
			cr_fail "one rank under stasis printed other than without it (${kind%%:*})"
		}
		cr_expect_line "one-${kind%%:*}" "${kind#*:} \\(this MPI makes no window" \
			"one rank: ${kind#*:} unprotected, named"
	done
	CR_NP=$CR_SAVED_NP CR_ARGS=("${CR_SAVED_ARGS[@]}")
fi

[[ $mode == long ]] && export STASIS_VERBOSE=1
commits=2
if [[ $mode == pscw ]]; then
	export STASIS_INTERVAL=0.1
	commits=6
fi
cr_run run
cr_wait_commits run "$commits"
cr_kill run
newest=$(cr_newest_complete)
[[ -n $newest ]] || cr_fail "no complete checkpoint on disk after two commits"
if [[ $mode == long ]]; then
	cr_expect_line run "checkpoint waits for a passive-target epoch to end" \
		"a checkpoint held until the passive-target phase ended"
fi
# Every epoch here ends within a step: no attempt may have been taken inside
# one (the program's MPI_Allreduce under a lock was such a place).
if grep -q "checkpoint skipped" "$CR_TMP/run.err"; then
	cr_show run
	cr_fail "a checkpoint was skipped: $(grep -m 1 "checkpoint skipped" "$CR_TMP/run.err")"
fi
cr_ok "no checkpoint skipped"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from the newest complete checkpoint ($newest)"
cr_expect_same restart
cr_pass "windows --$mode: killed after $commits checkpoints, restarted from $newest, same output"
