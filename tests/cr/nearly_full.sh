#!/bin/bash
# nearly_full.sh: an incremental image nearly as large as a full one is
# written full, and starts a new chain. tests/apps/phases --all rewrites all
# its memory every iteration until the test creates a file, then writes one
# page per iteration. While everything is rewritten, every checkpoint must be
# committed "full" although tracking is armed; once the program is quiet,
# incremental ones must follow; and a restart from the newest must resume.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export CR_NP=2 STASIS_INTERVAL=0.3
cr_setup
cr_track_by_memory
export STASIS_FULL_EVERY=1000
cr_app phases 16 1000000000 --all --switch "$CR_TMP/quiet"

kinds() { grep -oE -- "$CR_COMMIT_RE: (full|incremental)" "$CR_TMP/$1.err" | sed -E 's/.*: //'; }

cr_run run
cr_wait_commits run 4
busy=$(kinds run | head -n 4 | sort | uniq -c | tr -s ' ')
[[ $(kinds run | head -n 4 | grep -c incremental) == 0 ]] ||
	cr_fail "all memory rewritten, yet incremental images were written: $busy"
cr_ok "all memory rewritten: the first 4 checkpoints are full"
touch "$CR_TMP/quiet"
cr_wait_line run 'phases: quiet from iteration'
n=$(cr_commits run)
cr_wait_line run "$CR_COMMIT_RE: incremental"
cr_wait_commits run $((n + 3))
quiet=$(kinds run | tail -n +$((n + 1)) | grep -c incremental || true)
((quiet >= 2)) || cr_fail "only $quiet incremental images once the program went quiet"
cr_kill run
newest=$(cr_newest_complete)

cr_restart_bg restart
cr_wait_line restart "resumed from checkpoint $newest\\b"
cr_kill restart
cr_pass "full images while all memory changed, $quiet incremental ones after; resumed from $newest"
