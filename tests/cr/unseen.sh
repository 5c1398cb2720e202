#!/bin/bash
# unseen.sh: a program whose MPI_Init stasis does not see (PMPI_Init found
# with dlsym, tests/apps/unseen.c) runs to its end under stasis-run, and
# rank 0 says within one interval, while it runs, that it runs unprotected,
# and at its end in one line that it ran unprotected (mpi/unseen.h), and
# stasis-restart says so as the reason it has nothing to resume; a program
# whose MPI_Init stasis sees (heat, briefly) says no such thing.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
unseen_re='initialised MPI without passing through stasis.s MPI_Init.*no checkpoint was taken'

# 4 s at STASIS_INTERVAL=0.5: the watcher's line must come while it runs.
cr_app unseen 2000 4
cr_run run
cr_wait_line run 'without passing through stasis.s MPI_Init.*no checkpoint will be taken'
cr_alive run || cr_fail "the job ended before it was told it runs unprotected"
cr_ok "told while it ran: $(grep -m 1 'no checkpoint will be taken' "$CR_TMP/run.err")"
cr_wait_exit run
cr_expect_status run 0
grep -q '^unseen: iters=2000 sum=12000$' "$CR_TMP/run.out" || {
	cr_show run
	cr_fail "the unseen program did not print its result"
}
cr_expect_line run "$unseen_re" "the run said it was unprotected"
n=$(grep -cE -- "$unseen_re" "$CR_TMP/run.err" || true)
((n == 1)) || cr_fail "the line came $n times, not once (rank 0 only)"
n=$(grep -c 'no checkpoint will be taken' "$CR_TMP/run.err" || true)
((n == 1)) || cr_fail "the watcher's line came $n times, not once (rank 0 only)"
(($(cr_commits run) == 0)) || cr_fail "checkpoints committed by a run stasis did not see"
# stasis-restart finds nothing and says why.
cr_restart restart
cr_expect_failure restart
cr_expect_words restart "stasis-restart said why there is nothing" "nothing to restart from" \
	"last run under stasis initialised MPI without passing through stasis.s MPI_Init"

# Under the same job key: a run stasis sees takes the note away.
[[ -s $STASIS_DIR/unseen/unseen ]] || cr_fail "no note left in $STASIS_DIR/unseen"
cr_app heat 64 200
STASIS_JOB=unseen cr_run_wait seen
cr_expect_status seen 0
[[ ! -e $STASIS_DIR/unseen/unseen ]] || cr_fail "the note outlived a run stasis saw"
if grep -qE -- "without passing through stasis|runs unprotected" "$CR_TMP/seen.err"; then
	cr_show seen
	cr_fail "a program whose MPI_Init stasis saw was said to be unseen"
fi
cr_ok "heat, seen, was not said to be unseen"
cr_pass "an unseen MPI_Init said once, on rank 0; a seen one not"
