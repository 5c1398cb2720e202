#!/bin/bash
# err_objects.sh: a restart that cannot load a library the program had
# loaded with dlopen() must stop with one line naming it, and lose nothing.
# The plugin program runs from a copy of its directory. It is killed after
# two checkpoints taken once it loaded libplugtwo.so (and after others taken
# before). First the restart with every library there: it must resume from
# that checkpoint and print what the uninterrupted run printed (a library
# loaded after a checkpoint belongs in the next one's record). Then, from
# the same files, the library is removed and the restart must refuse.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
mkdir "$CR_TMP/app"
cp "$STASIS_BUILD/tests/apps/plugin" "$STASIS_BUILD"/tests/apps/libplug*.so "$CR_TMP/app/"
cr_app "$CR_TMP/app/plugin" 4096 8000
# Checkpoints every 0.5 s: about two before the load (a third of the
# run), two after it, and the rest of the run for the restart.
cr_reference
cr_run run
cr_wait_line run 'loaded libplugtwo.so'
before=$(cr_commits run)
cr_wait_commits run $((before + 2))
cr_kill run
((before > 0)) || cr_fail "no checkpoint before libplugtwo.so was loaded"
newest=$(cr_newest_complete)
cp -a "$STASIS_DIR" "$CR_TMP/saved"
cr_restart resumed
cr_expect_status resumed 0
cr_expect_line resumed "resumed from checkpoint $newest\\b" "resumed from checkpoint $newest"
cr_expect_same resumed
rm -rf "$STASIS_DIR"
mv "$CR_TMP/saved" "$STASIS_DIR"
rm "$CR_TMP/app/libplugtwo.so"
cr_snapshot "$CR_TMP/before"
cr_restart restart
cr_expect_failure restart
cr_expect_words restart "the restart names the library" '^stasis' 'libplugtwo\.so'
lines=$(grep -c '^stasis.*libplugtwo' "$CR_TMP/restart.err" || true)
((lines == 1)) || cr_fail "$lines lines of stasis's name the library, expected one"
cr_expect_unchanged "$CR_TMP/before"
cr_pass "a library loaded with dlopen() that is gone stops the restart with one line"
