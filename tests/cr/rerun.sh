#!/bin/bash
# rerun.sh APP [ARGS...]: a fresh stasis-run in a directory that holds an
# earlier run's checkpoints (the user meant stasis-restart, or ran the job
# again) must neither reuse their names nor remove them, must say so, and a
# later stasis-restart must resume the newer run.
#
# Run A: kill after two checkpoints. Run B (stasis-run again, same job):
# kill after three, enough for retention (STASIS_KEEP=2) to have removed
# B's own first one. Then: every file of A is there unchanged, B's ids are
# all above A's, B warned naming the earlier run, and stasis-restart
# resumes B's newest with the output of an uninterrupted run.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app "${1:?usage: rerun.sh APP [ARGS...]}" "${@:2}"
cr_reference
export STASIS_KEEP=2

cr_run a
cr_wait_commits a 2
cr_kill a
a_newest=$(cr_newest_complete)
a_files=$CR_TMP/a.snapshot
# The lock files are empty and shared by every run of the job.
CR_SNAPSHOT_SKIP='lock.r*' cr_snapshot "$a_files"
cr_ok "run a: newest complete checkpoint $a_newest, $(wc -l <"$a_files") files"

cr_run b
cr_wait_commits b 3
cr_kill b
cr_expect_words b "run b warns that the earlier run's checkpoints stay" \
	stasis 'earlier run' "[(]up to $a_newest[)]"
b_first=$(grep -oE -- "$CR_COMMIT_RE" "$CR_TMP/b.err" | head -n 1 | sed -E 's/.*checkpoint ([0-9]+) committed/\1/')
((b_first > a_newest)) || cr_fail "run b's first checkpoint is $b_first, not above run a's $a_newest"
cr_ok "run b numbered its checkpoints from $b_first, above run a's $a_newest"

cr_snapshot "$CR_TMP/now.snapshot"
missing=$(comm -23 <(sort "$a_files") <(sort "$CR_TMP/now.snapshot"))
[[ -z $missing ]] || cr_fail "run b removed or changed files of run a: $missing"
cr_ok "every file of run a is still there, unchanged"

newest=$(cr_newest_complete)
((newest >= $(cr_last_commit b))) || cr_fail "newest complete checkpoint $newest is not run b's ($(cr_last_commit b))"
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed run b's newest checkpoint ($newest)"
cr_expect_same restart
cr_pass "$(basename "$CR_APP"): a second stasis-run kept run a's checkpoints ($a_newest), restart resumed run b ($newest)"
