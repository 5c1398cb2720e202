#!/bin/bash
# err_objects.sh: a restart that cannot load a library the program had
# loaded with dlopen() must stop with one line naming it, and lose nothing.
# The plugin program runs from a copy of its directory; after a checkpoint
# taken once it loaded libplugtwo.so, the library is removed.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
mkdir "$CR_TMP/app"
cp "$STASIS_BUILD/tests/apps/plugin" "$STASIS_BUILD"/tests/apps/libplug*.so "$CR_TMP/app/"
cr_app "$CR_TMP/app/plugin" 4096 8000
# Two thirds of the run, after the load, for two more checkpoints.
cr_reference 8
cr_run run
cr_wait_line run 'loaded libplugtwo.so'
before=$(cr_commits run)
cr_wait_commits run $((before + 2))
cr_kill run
rm "$CR_TMP/app/libplugtwo.so"
cr_snapshot "$CR_TMP/before"
cr_restart restart
cr_expect_failure restart
cr_expect_words restart "the restart names the library" '^stasis' 'libplugtwo\.so'
lines=$(grep -c '^stasis.*libplugtwo' "$CR_TMP/restart.err" || true)
((lines == 1)) || cr_fail "$lines lines of stasis's name the library, expected one"
cr_expect_unchanged "$CR_TMP/before"
cr_pass "a library loaded with dlopen() that is gone stops the restart with one line"
