#!/bin/bash
# kill_chain.sh APP [ARGS...]: SIGKILL the job at a random instant, restart
# it, kill the restart at a random instant once it has committed a
# checkpoint of its own, and so on, CR_KILLS times (12; 100 in the soak
# suite) in all. Every restart must resume from the newest complete
# checkpoint, and a restart that runs to the end must print what the
# uninterrupted run printed: a restart that resumed from anything wrong
# would carry it to the end. The instants fall anywhere: computing, waiting
# in MPI, draining, writing, committing. How far the program gets per kill
# depends on the machine's load, so the chain is cut into segments: when the
# program ends, its output is compared and a fresh run starts the next
# segment, until all the kills are done (the last segment runs to its end).
# CR_SEED reproduces a run.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

# Short intervals: many links, each one commit long.
export STASIS_INTERVAL=${STASIS_INTERVAL:-0.25}
cr_setup
cr_app "${1:?usage: kill_chain.sh APP [ARGS...]}" "${@:2}"
seed=${CR_SEED:-$((RANDOM * 32768 + RANDOM))}
kills=${CR_KILLS:-12}
RANDOM=$seed
cr_say "seed $seed (rerun with CR_SEED=$seed), $kills kills"
# Long enough for several links per segment.
cr_reference 10

# check_end NAME: the job ended by itself: status 0, the uninterrupted output.
check_end() {
	cr_wait_exit "$1"
	cr_expect_status "$1" 0
	cr_expect_same "$1"
}

k=0 seg=0
while ((k < kills)); do
	seg=$((seg + 1))
	# A fresh run: the previous segment's checkpoints are its own.
	rm -rf "$STASIS_DIR"
	prev=s$seg.0
	cr_run "$prev"
	cr_wait_commits "$prev" 1
	links=0
	while ((k < kills)); do
		# Up to one interval after the last commit.
		ms=$(printf '%03d' $(((RANDOM * 32768 + RANDOM) % 250)))
		sleep "0.$ms"
		if ! cr_alive "$prev"; then
			((links > 0)) || cr_fail "segment $seg ended before its first kill; lengthen the run"
			check_end "$prev"
			cr_say "segment $seg ended after $links kills"
			break
		fi
		cr_kill "$prev"
		newest=$(cr_newest_complete)
		[[ -n $newest ]] || cr_fail "kill $((k + 1)): no complete checkpoint on disk"
		k=$((k + 1)) links=$((links + 1))
		cr_restart_bg "s$seg.$links"
		prev=s$seg.$links
		cr_wait_line "$prev" 'resumed from checkpoint'
		cr_expect_line "$prev" "resumed from checkpoint $newest\\b" "kill $k at +0.${ms}s: resumed from $newest"
		((k == kills)) && break
		# The next kill only once this restart committed one of its own
		# (or it ended, which ends the segment at the top of the loop).
		while (($(cr_commits "$prev") < 1)) && cr_alive "$prev"; do
			sleep 0.05
		done
	done
done
check_end "$prev"
cr_pass "$kills kills in $seg segment(s) (seed $seed): every restart resumed from the newest complete checkpoint, every end gave the uninterrupted output"
