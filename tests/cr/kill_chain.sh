#!/bin/bash
# kill_chain.sh APP [ARGS...]: SIGKILL the job at a random instant, restart
# it, kill the restart at a random instant once it has committed a
# checkpoint of its own, and so on CR_KILLS times (20); the last restart
# runs to the end and must print what the uninterrupted run printed. How
# far the program gets in one link depends on the machine's load (the
# commit lines reach us late through mpirun): a program that ends before
# the last kill ends the chain, which must have had half its kills. Every
# restart must resume from the newest complete checkpoint: a restart that
# resumed from anything wrong would carry it to the end. The instants fall
# anywhere: computing, waiting in MPI, draining, writing, committing.
# CR_SEED reproduces a run.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

# Short intervals: many links, each one commit long.
export STASIS_INTERVAL=${STASIS_INTERVAL:-0.25}
cr_setup
cr_app "${1:?usage: kill_chain.sh APP [ARGS...]}" "${@:2}"
seed=${CR_SEED:-$((RANDOM * 32768 + RANDOM))}
kills=${CR_KILLS:-20}
RANDOM=$seed
cr_say "seed $seed (rerun with CR_SEED=$seed), $kills kills"
# Each link moves the job on by one to two intervals, and more when the
# commit lines come late.
cr_reference $((6 + kills / 2))

cr_run job0
cr_wait_commits job0 1
for ((k = 1; k <= kills; k++)); do
	prev=job$((k - 1))
	# Up to one interval after the last commit.
	ms=$(((RANDOM * 32768 + RANDOM) % 250))
	sleep "0.$(printf '%03d' "$ms")"
	if ! cr_alive "$prev"; then
		cr_reap "$prev"
		if ((k <= kills / 2)); then
			cr_show "$prev"
			cr_fail "kill $k: the job ended before it (status ${CR_STATUS[$prev]}); lengthen the run"
		fi
		cr_say "the job ended before kill $k: the chain ends there"
		kills=$((k - 1))
		break
	fi
	cr_kill "$prev"
	newest=$(cr_newest_complete)
	[[ -n $newest ]] || cr_fail "kill $k: no complete checkpoint on disk"
	cr_restart_bg "job$k"
	cr_wait_line "job$k" 'resumed from checkpoint'
	cr_expect_line "job$k" "resumed from checkpoint $newest\\b" "kill $k at +0.$(printf '%03d' "$ms")s: resumed from $newest"
	((k == kills)) || cr_wait_commits "job$k" 1
done
cr_wait_exit "job$kills"
cr_expect_status "job$kills" 0
cr_expect_same "job$kills"
cr_pass "$kills kills in a chain (seed $seed): the last restart gave the uninterrupted output"
