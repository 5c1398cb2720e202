#!/bin/bash
# err_ranks.sh: restarting a 4-rank checkpoint with 2 ranks must fail with a
# line about the rank count, and leave the checkpoint files as they were.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app heat
cr_reference
CR_NP=4 cr_prepare_checkpoints 2
before=$CR_TMP/before.snapshot
cr_snapshot "$before"

CR_NP=2 cr_restart restart2
cr_expect_failure restart2
cr_expect_words restart2 "stasis-restart names the rank count" stasis 'rank'
cr_expect_unchanged "$before"
cr_pass "restart of a 4-rank checkpoint with 2 ranks refused, no file lost"
