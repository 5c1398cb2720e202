#!/bin/bash
# chain_full.sh APP [COMMITS [ARGS...]]: a chain of incremental images holds
# exactly the memory a full image would. Run APP under stasis-run with
# STASIS_SHADOW_FULL=1 (a full "shadow" image beside every incremental one)
# and the tracking backend of STASIS_DIRTY, kill it after COMMITS (default
# 5: a full image and >= 4 incremental ones), then run chain_compare for
# every rank and every complete incremental checkpoint: the chain applied
# page by page must equal its shadow. Last, chain_compare --corrupt on one
# of them must fail, so that a broken comparison cannot pass unnoticed.
#
# Env CHAIN_COMPARE: the chain_compare program (default: the build's).
# CHAIN_WANT_ZEROS=1: some image must have left pages of zeros out.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

app=${1:?usage: chain_full.sh APP [COMMITS [ARGS...]]}
want=${2:-5}
cr_setup
cr_track_by_memory
compare=${CHAIN_COMPARE:-$STASIS_BUILD/tests/unit/chain_compare}
[[ -x $compare ]] || cr_fail "$compare is missing"
export STASIS_SHADOW_FULL=1
# Keep every image: a pruned parent would cut the chains short.
export STASIS_KEEP=1000
# No second full image before the kill: the longest chains.
export STASIS_FULL_EVERY=$((want + 8))
cr_say "STASIS_DIRTY=${STASIS_DIRTY:-auto}"
cr_app "$app" "${@:3}"
cr_reference $((want + 3))

cr_run run
cr_wait_commits run "$want"
cr_kill run

job=$STASIS_DIR/$(basename "$CR_APP")
[[ -d $job/shadow ]] || cr_fail "no shadow images under $job: STASIS_SHADOW_FULL had no effect"
# Complete incremental checkpoints: a commit record and a shadow image.
ids=$(find "$job" -maxdepth 1 -name 'ckpt-*.r0.done' -printf '%f\n' | sed -E 's/^ckpt-([0-9]+)\..*/\1/' | sort -n)
checked=0
for id in $ids; do
	[[ -f $job/shadow/ckpt-$id.r0.img ]] || continue
	for ((r = 0; r < CR_NP; r++)); do
		out=$("$compare" "$job" "$r" "$id" 2>&1) || {
			printf '%s\n' "$out"
			cr_fail "rank $r checkpoint $id: the chain differs from the full shadow image"
		}
		printf '%s\n' "$out" >"$CR_TMP/compare.$r.$id"
		cr_say "$out"
		checked=$((checked + 1))
	done
done
((checked >= 4 * CR_NP)) || cr_fail "only $checked (rank, incremental checkpoint) pairs to check, wanted >= $((4 * CR_NP))"
cr_ok "$checked chains equal their shadow images"
if [[ ${CHAIN_WANT_ZEROS:-0} == 1 ]]; then
	zeros=$(grep -ho 'pages of zeros: [0-9]*' "$CR_TMP"/compare.* 2>/dev/null | awk '{ s += $4 } END { print s + 0 }')
	((zeros > 0)) || cr_fail "no image of the chains left a page of zeros out"
	cr_ok "$zeros pages of zeros left out of the images and put back as zeros"
fi
if [[ ${STASIS_COMPRESS:-none} != none ]]; then
	# Every checkpoint's images were packed with the codec asked for.
	kinds=$("$STASIS_BUILD/tools/stasis-inspect" --json | grep -o '"codec": *"[a-z0-9]*"' | sort | uniq -c)
	[[ $(wc -l <<<"$kinds") == 1 && $kinds == *"\"$STASIS_COMPRESS\""* ]] ||
		cr_fail "images not all packed with $STASIS_COMPRESS: $kinds"
	cr_ok "every image packed with $STASIS_COMPRESS"
fi

# The negative control: one corrupted byte must be seen.
if out=$("$compare" "$job" 0 "$id" --corrupt 2>&1); then
	printf '%s\n' "$out"
	cr_fail "chain_compare --corrupt passed: the comparison does not see a corrupted page"
fi
cr_ok "chain_compare --corrupt fails as it must: $(grep -m 1 differs <<<"$out")"
cr_pass "$(basename "$CR_APP") under STASIS_DIRTY=${STASIS_DIRTY:-auto}: every chain restores what a full image holds"
