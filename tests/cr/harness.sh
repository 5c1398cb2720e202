#!/bin/bash
# harness.sh: tests the harness (tests/lib/cr.sh) itself with stand-in
# tools that only run the command (tests/lib/fake-stasis-*), so it needs no
# stasis library: the reference run is deterministic, waiting for lines and
# exits works, SIGKILL of a job reaches every rank and leaves nothing
# running, and the comparisons fail when they should.
set -euo pipefail
lib=$(cd "$(dirname "$0")/../lib" && pwd)
# shellcheck source=../lib/cr.sh
source "$lib/cr.sh"

export CR_STASIS_RUN=$lib/fake-stasis-run CR_STASIS_RESTART=$lib/fake-stasis-restart
cr_setup
# Two real uninterrupted runs, never one shared by an earlier test.
export CR_REF_SHARED=0
cr_app heat 512 6000

cr_reference
cp "$CR_TMP/ref.out" "$CR_TMP/ref1.out"
cr_reference
cmp -s "$CR_TMP/ref.out" "$CR_TMP/ref1.out" || cr_fail "two uninterrupted runs differ"
cr_ok "two uninterrupted runs print the same"

# A job: wrapper script -> mpirun -> 4 ranks. All must be found and killed.
cr_run run
cr_wait_commits run 2
pids=$(cr_job_pids run | wc -l)
((pids >= CR_NP + 2)) || cr_fail "found only $pids processes of the job (wrapper, mpirun, $CR_NP ranks expected)"
cr_ok "found $pids live processes of the job"
ranks=$(pgrep -x heat | wc -l)
cr_kill run
left=$(for p in $(pgrep -x heat); do
	if grep -qzxF "CR_JOB=$CR_TMP/run" "/proc/$p/environ" 2>/dev/null; then echo "$p"; fi
done)
[[ -z $left ]] || cr_fail "ranks of the killed job still run: $left"
cr_ok "$ranks heat processes before the kill, none of the job after it"
[[ ! -s $CR_TMP/run.out ]] || cr_fail "the killed job printed a result"

# The restart stand-in runs from the start: same output expected.
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint" "restart line seen"
cr_expect_same restart

# The checks must fail when they should (in subshells: cr_fail exits).
echo "different" >"$CR_TMP/bad.out"
: >"$CR_TMP/bad.err"
if (cr_expect_same bad >/dev/null); then cr_fail "cr_expect_same accepted different output"; fi
cr_ok "cr_expect_same rejects different output"
echo "stasis: bad value for STASIS_INTERVAL: 'abc'" >"$CR_TMP/bad.err"
(cr_expect_words bad "x" stasis STASIS_INTERVAL abc >/dev/null) || cr_fail "cr_expect_words missed a line"
if (cr_expect_words bad "x" stasis STASIS_KEEP >/dev/null); then cr_fail "cr_expect_words matched a wrong line"; fi
cr_ok "cr_expect_words finds the words on one line and only then"

rm -rf "${STASIS_DIR:?}"/*
mkdir -p "$STASIS_DIR/heat"
echo a >"$STASIS_DIR/heat/ckpt-1.r0.img"
echo b >"$STASIS_DIR/heat/ckpt-1.r0.done"
cr_snapshot "$CR_TMP/snap"
(cr_expect_unchanged "$CR_TMP/snap" >/dev/null) || cr_fail "cr_expect_unchanged failed on an untouched directory"
[[ $(cr_newest_complete) == 1 ]] || cr_fail "cr_newest_complete did not find checkpoint 1"
rm "$STASIS_DIR/heat/ckpt-1.r0.img"
if (cr_expect_unchanged "$CR_TMP/snap" >/dev/null); then cr_fail "cr_expect_unchanged missed a lost file"; fi
cr_ok "cr_expect_unchanged detects a lost file"

# A job that exits before printing the awaited line is a failure, fast.
cr_start short true
if (cr_wait_line short "never printed" 30 >/dev/null); then cr_fail "cr_wait_line accepted a job that exited"; fi
cr_ok "cr_wait_line fails when the job exits first"
[[ -d $CR_TMP ]] || cr_fail "a subshell's exit removed the temporary directory"
cr_pass "harness works with plain mpirun"
