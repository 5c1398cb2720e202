#!/bin/bash
# err_exe.sh: the job key is the executable's basename, so a different
# program installed at the same path finds the old checkpoints. Restoring
# them into it would be nonsense: the restart must fail with a line about
# the executable, and leave the files as they were.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
mkdir -p "$CR_TMP/bin"
cp "$STASIS_BUILD/tests/apps/heat" "$CR_TMP/bin/app"
# shellcheck disable=SC2046 # the default arguments are words
cr_app "$CR_TMP/bin/app" $(cr_default_args heat)
cr_reference
cr_prepare_checkpoints 2
before=$CR_TMP/before.snapshot
cr_snapshot "$before"

# A new file (not an in-place write): what an install or rebuild does.
cp "$STASIS_BUILD/tests/apps/state" "$CR_TMP/bin/app.new"
mv -f "$CR_TMP/bin/app.new" "$CR_TMP/bin/app"
cr_restart restart
cr_expect_failure restart
cr_expect_words restart "stasis-restart names the executable" stasis executable
cr_expect_unchanged "$before"
cr_pass "restart into a different executable at the same path refused, no file lost"
