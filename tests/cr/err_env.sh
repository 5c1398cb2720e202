#!/bin/bash
# err_env.sh: a bad configuration value stops the job at MPI_Init with one
# line naming the variable and the value, a non-zero status, no program
# output, and no harm to the checkpoints already on disk -- for stasis-run
# and for stasis-restart.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app heat
cr_reference
cr_prepare_checkpoints 2
before=$CR_TMP/before.snapshot
cr_snapshot "$before"

STASIS_INTERVAL=abc cr_run_wait bad_run
cr_expect_failure bad_run
cr_expect_words bad_run "stasis-run names the variable and the value" stasis STASIS_INTERVAL abc
[[ ! -s $CR_TMP/bad_run.out ]] || cr_fail "the program ran and printed output despite the bad value"
cr_expect_unchanged "$before"

STASIS_TRACK_FAULT_US=-3 cr_run_wait bad_cost
cr_expect_failure bad_cost
cr_expect_words bad_cost "a negative fault cost is named" stasis STASIS_TRACK_FAULT_US -3
cr_expect_unchanged "$before"

STASIS_COMPRESS=gzip cr_run_wait bad_codec
cr_expect_failure bad_codec
cr_expect_words bad_codec "a codec stasis does not have is named" stasis STASIS_COMPRESS gzip
cr_expect_unchanged "$before"

STASIS_INTERVAL=abc cr_restart bad_restart
cr_expect_failure bad_restart
cr_expect_words bad_restart "stasis-restart names the variable and the value" stasis STASIS_INTERVAL abc
cr_expect_unchanged "$before"
cr_pass "STASIS_INTERVAL=abc rejected by stasis-run and stasis-restart, STASIS_TRACK_FAULT_US=-3 and STASIS_COMPRESS=gzip by stasis-run, no file lost"
