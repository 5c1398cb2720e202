#!/bin/bash
# err_args.sh: what names a job, and what a restart checks of it.
#  - A restart with other program arguments would resume the old ones (they
#    are in the restored memory) while the user asked for new ones: it must
#    stop with a line about the arguments and leave every file as it was.
#  - STASIS_JOB names the job's directory: a bad name stops the run with a
#    line naming it; a second job of the same executable under its own name
#    checkpoints and restarts beside the first without touching its files.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app heat
cr_reference
cr_prepare_checkpoints 2
job=$(basename "$CR_APP")
before=$CR_TMP/before.snapshot
cr_snapshot "$before"
cr_snapshot "$CR_TMP/first.snapshot" "$STASIS_DIR/$job"

# The same executable and rank count, one iteration more.
args=("${CR_ARGS[@]}")
at=$(cr_iters_index)
[[ -n $at ]] || cr_fail "no iteration count in: ${CR_ARGS[*]}"
CR_ARGS[at]=$((CR_ARGS[at] + 1))
cr_restart other_args
CR_ARGS=("${args[@]}")
cr_expect_failure other_args
cr_expect_words other_args "the error names the arguments" stasis 'arguments'
[[ ! -s $CR_TMP/other_args.out ]] || cr_fail "the program ran: $(cat "$CR_TMP/other_args.out")"
cr_expect_unchanged "$before"

STASIS_JOB=../up cr_run_wait bad_job
cr_expect_failure bad_job
cr_expect_words bad_job "the error names the variable and the value" stasis STASIS_JOB '\.\./up'
cr_expect_unchanged "$before"

# A second job of the same executable, named: its own directory.
STASIS_JOB=second cr_run second
cr_wait_commits second 2
cr_kill second
[[ -n $(find "$STASIS_DIR/second" -name 'ckpt-*.done') ]] ||
	cr_fail "no checkpoint of job 'second' under $STASIS_DIR/second"
cr_expect_unchanged "$CR_TMP/first.snapshot" "$STASIS_DIR/$job"
cr_ok "job 'second' checkpointed in $STASIS_DIR/second beside job '$job'"
STASIS_JOB=second cr_restart second_restart
cr_expect_status second_restart 0
cr_expect_line second_restart 'resumed from checkpoint [0-9]+' "job 'second' resumed"
cr_expect_same second_restart
cr_pass "other arguments refused, a bad STASIS_JOB refused, a named second job kept apart; no file lost"
