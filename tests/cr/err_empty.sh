#!/bin/bash
# err_empty.sh: stasis-restart with nothing to restart from (empty
# STASIS_DIR) fails with a message and creates no checkpoint file.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app heat
before=$CR_TMP/before.snapshot
cr_snapshot "$before"

cr_restart restart
cr_expect_failure restart
cr_expect_words restart "stasis-restart explains" stasis 'checkpoint|nothing to restart'
[[ ! -s $CR_TMP/restart.out ]] || cr_fail "the program ran from the start instead of failing"
cr_expect_unchanged "$before"
cr_pass "stasis-restart with an empty STASIS_DIR refused"
