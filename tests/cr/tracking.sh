#!/bin/bash
# tracking.sh [MIB]: tracking pays for itself (memory/track_policy.h), end to
# end, with the backend of STASIS_DIRTY. The program (tests/apps/phases)
# rewrites all of one array (BUSY, MIB MiB per rank) every iteration and never
# touches another (STILL), until the test creates a file; from then on it
# writes one page of BUSY per iteration. Read from the STASIS_VERBOSE=1 lines
#   stasis: checkpoint <id> tracking: <P> bytes write-protected, <W> bytes saved whole, ...
# the test requires:
#   1. while BUSY is rewritten: a line with W at least the 2 MiB blocks
#      BUSY covers whole (MIB - 4 MiB per rank: the blocks at its ends
#      hold other memory too, and may rightly stay protected) and below
#      BUSY + a quarter of it: BUSY stopped being write-protected, STILL
#      (as large) did not;
#   2. once BUSY is quiet: a line, within 3 checkpoints, with W below a
#      quarter of BUSY: it is protected again;
#   3. every chain of incremental images, those with BUSY saved whole
#      included, restores exactly the memory of a full image of the same
#      checkpoint (STASIS_SHADOW_FULL, tests/unit/chain_compare).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mib=${1:-16}
export CR_NP=2 STASIS_INTERVAL=0.3
cr_setup
compare=$STASIS_BUILD/tests/unit/chain_compare
[[ -x $compare ]] || cr_fail "$compare is missing"
export STASIS_SHADOW_FULL=1 STASIS_KEEP=1000 STASIS_FULL_EVERY=1000
cr_say "STASIS_DIRTY=${STASIS_DIRTY:-auto}"
cr_app phases "$mib" 1000000000 --switch "$CR_TMP/quiet"
busy=$((CR_NP * mib * 1048576))
inner=$((CR_NP * (mib - 4) * 1048576))

# tracking_lines FROM: "<id> <protected> <whole>" of every tracking line
# after line FROM of the job's stderr.
tracking_lines() {
	tail -n +"$1" "$CR_TMP/run.err" |
		sed -nE 's/^stasis: checkpoint ([0-9]+) tracking: ([0-9]+) bytes write-protected, ([0-9]+) bytes saved whole.*/\1 \2 \3/p'
}
# wait_tracking FROM AWK-CONDITION WHAT: until a tracking line after line
# FROM satisfies the condition on $3 (bytes saved whole); prints its id.
wait_tracking() {
	local from=$1 cond=$2 what=$3 deadline=$((SECONDS + CR_TIMEOUT)) id
	while :; do
		id=$(tracking_lines "$from" | awk "$cond { print \$1; exit }")
		[[ -n $id ]] && break
		# In a command substitution: say it on stderr, the caller exits.
		cr_alive run || { cr_show run; cr_fail "the job ended before $what"; } >&2
		((SECONDS < deadline)) || { cr_show run; cr_fail "no checkpoint within ${CR_TIMEOUT}s: $what"; } >&2
		sleep 0.1
	done
	echo "$id"
}

cr_run run
id1=$(wait_tracking 1 "\$3 >= $inner && \$3 < $busy * 1.25" \
	"BUSY ($busy bytes) saved whole and STILL write-protected")
cr_ok "checkpoint $id1: $(tracking_lines 1 | awk -v id="$id1" '$1 == id { print $3 }') bytes saved whole of $busy rewritten every iteration"
# Some incremental images with BUSY saved whole, for the comparison below.
cr_wait_commits run $(($(cr_commits run) + 2))

touch "$CR_TMP/quiet"
cr_wait_line run 'phases: quiet from iteration'
from=$(grep -n 'phases: quiet from iteration' "$CR_TMP/run.err" | head -n 1 | cut -d: -f1)
id2=$(wait_tracking "$from" "\$3 < $busy / 4" "BUSY, quiet now, write-protected again")
# A block saved whole is watched at every checkpoint (track_policy.h): the
# decision comes at the first checkpoint of a whole quiet interval, after
# the one under way when the file appeared.
after=$(tracking_lines "$from" | awk -v id="$id2" '$1 <= id' | wc -l)
((after <= 3)) || cr_fail "BUSY was protected again only $after checkpoints after it went quiet"
cr_ok "checkpoint $id2, $after checkpoint(s) after BUSY went quiet: $(tracking_lines "$from" | awk -v id="$id2" '$1 == id { print $3 }') bytes saved whole"
cr_wait_commits run $(($(cr_commits run) + 1))
cr_kill run

job=$STASIS_DIR/phases
checked=0
for id in $(find "$job/shadow" -name 'ckpt-*.r0.img' -printf '%f\n' | sed -E 's/^ckpt-([0-9]+)\..*/\1/' | sort -n); do
	[[ -f $job/ckpt-$id.r0.done ]] || continue
	for ((r = 0; r < CR_NP; r++)); do
		out=$("$compare" "$job" "$r" "$id" 2>&1) || {
			printf '%s\n' "$out"
			cr_fail "rank $r checkpoint $id: the chain differs from the full shadow image"
		}
		checked=$((checked + 1))
	done
done
((checked >= 2 * CR_NP)) || cr_fail "only $checked (rank, incremental checkpoint) pairs to compare"
cr_ok "$checked chains equal their full shadow images"
cr_pass "STASIS_DIRTY=${STASIS_DIRTY:-auto}: BUSY saved whole while rewritten, protected again within $after checkpoints once quiet; chains exact"
