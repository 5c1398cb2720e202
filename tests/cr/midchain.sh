#!/bin/bash
# midchain.sh APP [COMMITS [ARGS...]]: restart from the middle of a chain of
# incremental images. Run APP under stasis-run, SIGKILL the job once it has
# committed a full image and at least COMMITS-1 (default 4, so >= 3)
# incremental ones, require that the last checkpoint committed before the
# kill was incremental (so the restart must apply a chain, not one full
# image), restart, and require the uninterrupted run's output.
#
# STASIS_FULL_EVERY is set large enough that no second full image cuts the
# chain short before the kill.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

app=${1:?usage: midchain.sh APP [COMMITS [ARGS...]]}
want=${2:-4}
cr_setup
cr_track_by_memory
export STASIS_FULL_EVERY=$((want + 8))
cr_app "$app" "${@:3}"
cr_reference $((want + 3))

cr_run run
cr_wait_commits run "$want"
cr_kill run

# What the job said about its checkpoints, read after the kill: nothing can
# be added to the file any more.
kinds=$(grep -oE -- "$CR_COMMIT_RE: (full|incremental)" "$CR_TMP/run.err" | sed -E 's/.*: //')
last_kind=$(tail -n 1 <<<"$kinds")
nincr=$(grep -c '^incremental$' <<<"$kinds" || true)
[[ $(head -n 1 <<<"$kinds") == full ]] || cr_fail "the first checkpoint was not full: $(head -n 1 <<<"$kinds")"
((nincr >= want - 1)) || cr_fail "only $nincr incremental checkpoints were committed, wanted $((want - 1))"
[[ $last_kind == incremental ]] ||
	cr_fail "the last checkpoint committed before the kill was $last_kind, not incremental"
last=$(cr_last_commit run)
newest=$(cr_newest_complete)
# The kill may land between the commit records and rank 0's line: then the
# newest on disk is one past the last line (still incremental, see above).
((newest == last || newest == last + 1)) ||
	cr_fail "newest complete checkpoint on disk is $newest, the job's last commit was $last"
cr_ok "killed after $(wc -l <<<"$kinds") checkpoints ($nincr incremental), the last ($last) incremental"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from the incremental checkpoint $newest"
cr_expect_same restart
cr_pass "$(basename "$CR_APP"): restarted from incremental checkpoint $newest (chain of $((nincr + 1))), same output"
