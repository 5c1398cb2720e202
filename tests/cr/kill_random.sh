#!/bin/bash
# kill_random.sh [APP [ARGS...]]: SIGKILL at a random instant after the first
# commit -- during computation, agreement, a write or a commit -- a few
# times. Every restart must resume from the newest complete checkpoint and
# give the uninterrupted output. CR_SEED reproduces a run, CR_ROUNDS sets
# the number of rounds (3).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app "${1:-heat}" "${@:2}"
seed=${CR_SEED:-$((RANDOM * 32768 + RANDOM))}
rounds=${CR_ROUNDS:-3}
RANDOM=$seed
cr_say "seed $seed (rerun with CR_SEED=$seed), $rounds rounds"
cr_reference

for ((r = 1; r <= rounds; r++)); do
	rm -rf "${STASIS_DIR:?}"/*
	cr_run "run$r"
	cr_wait_commits "run$r" 1
	# Up to 60% of the uninterrupted run time after the first commit: the
	# job under stasis is no faster, so the kill almost always lands.
	ms=$(((RANDOM * 32768 + RANDOM) % (CR_REF_MS * 6 / 10 + 1)))
	delay=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
	sleep "$delay"
	if ! cr_alive "run$r"; then
		# Not a failure of stasis: the job outran the delay. Check it.
		cr_reap "run$r"
		cr_expect_status "run$r" 0
		cr_expect_same "run$r"
		cr_say "round $r: the job finished before the kill at +${delay}s"
		continue
	fi
	cr_kill "run$r"
	newest=$(cr_newest_complete)
	[[ -n $newest ]] || cr_fail "round $r: a commit was reported but no commit record is on disk"
	cr_say "round $r: killed at +${delay}s after the first commit, newest complete checkpoint $newest"
	cr_restart "restart$r"
	cr_expect_status "restart$r" 0
	cr_expect_line "restart$r" "resumed from checkpoint $newest\\b" "round $r resumed from $newest"
	cr_expect_same "restart$r"
done
cr_pass "$rounds random kills (seed $seed), every restart gave the same output"
