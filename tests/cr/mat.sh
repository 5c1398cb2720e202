#!/bin/bash
# mat.sh: MAT's incremental images stay under 1% of its full image (the
# reason for incremental checkpoints, which the tracking policy of
# memory/track_policy.h must not lose). MAT (bench/apps/mat.c)
# computes C = A * B one row of C per iteration, at most 10 rows a second
# (--rate: the rows per interval do not depend on the machine's speed); A
# and B, 98% of its memory, are never written after they are filled.
# Under stasis-run with STASIS_DIRTY as given, the test waits for a full
# image and five incremental ones and requires their mean size, from the
# STASIS_VERBOSE=1 "committed" lines, below 1% of the full one.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
export STASIS_INTERVAL=0.5 STASIS_FULL_EVERY=100
cr_say "STASIS_DIRTY=${STASIS_DIRTY:-auto}"
cr_app mat 3072 768 --rate 10
cr_run run
cr_wait_commits run 6
cr_kill run

read -r full incr n < <(grep -E "$CR_COMMIT_RE" "$CR_TMP/run.err" |
	awk '{ b = $(NF-3); k = $(NF-4) }
	     k == "full," && !f { f = b }
	     k == "incremental," && f { s += b; n++ }
	     END { printf "%d %d %d\n", f, n ? s / n : 0, n }')
((full > 0)) || cr_fail "no full image committed"
((n >= 4)) || cr_fail "only $n incremental images after the first full one"
pct=$(awk -v i="$incr" -v f="$full" 'BEGIN { printf "%.3f", 100 * i / f }')
awk -v p="$pct" 'BEGIN { exit !(p < 1) }' ||
	cr_fail "MAT's incremental images are $pct% of its full image ($incr of $full bytes, mean of $n): wanted < 1%"
cr_pass "MAT: $n incremental images, mean $incr bytes, $pct% of the full image ($full bytes)"
