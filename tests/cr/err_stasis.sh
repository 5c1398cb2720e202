#!/bin/bash
# err_stasis.sh: a checkpoint's saved stack returns into stasis's own code,
# so a restart under another build of libstasis.so (an upgrade, a rebuild)
# would run the program on wrong state. The restart must stop with one
# line saying so and leave the files as they were; the build that took
# the checkpoint then resumes it to the uninterrupted answer.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
mkdir -p "$CR_TMP/lib"
cp "$STASIS_BUILD/preload/libstasis.so" "$CR_TMP/lib/libstasis.so"
cp "$CR_TMP/lib/libstasis.so" "$CR_TMP/lib/libstasis.so.orig"
export STASIS_LIB=$CR_TMP/lib/libstasis.so
# shellcheck disable=SC2046 # the default arguments are words
cr_app "$STASIS_BUILD/tests/apps/heat" $(cr_default_args heat)
cr_reference
cr_prepare_checkpoints 2
before=$CR_TMP/before.snapshot
cr_snapshot "$before"

# Another build at the same path: one byte more is another file to the
# loader's eyes and the same code to the test's (a new file, as an install
# makes).
{ cat "$CR_TMP/lib/libstasis.so.orig" && printf '\0'; } >"$CR_TMP/lib/libstasis.so.new"
mv -f "$CR_TMP/lib/libstasis.so.new" "$CR_TMP/lib/libstasis.so"
cr_restart other
cr_expect_failure other
cr_expect_line other "another build of stasis" "the restart names the build of stasis"
cr_expect_unchanged "$before"

cp "$CR_TMP/lib/libstasis.so.orig" "$CR_TMP/lib/libstasis.so.new"
mv -f "$CR_TMP/lib/libstasis.so.new" "$CR_TMP/lib/libstasis.so"
cr_restart same
cr_expect_status same 0
cr_expect_line same "resumed from checkpoint $CR_NEWEST\\b" "the build that took it resumes it"
cr_expect_same same
cr_pass "restart under another build of stasis refused, no file lost; the same build resumes"
