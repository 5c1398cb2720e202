#!/bin/bash
# damage.sh missing|corrupt|truncated [APP [ARGS...]]: damage rank 1's image
# of the newest complete checkpoint, then restart. stasis must not use it
# silently. Two outcomes are right:
#   - the restart fails with a line naming the damaged file, and every
#     checkpoint file is left as it was;
#   - the restart warns with a line naming the file, resumes from an older
#     complete checkpoint, and the output equals the uninterrupted run's.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: damage.sh missing|corrupt|truncated [APP [ARGS...]]}
cr_setup
cr_app "${2:-heat}" "${@:3}"
cr_reference 6
# Three commits, so that with STASIS_KEEP=2 an older complete one remains.
cr_prepare_checkpoints 3
newest=$CR_NEWEST
img=$(cr_ckpt_file "$newest" 1 img)
[[ -n $img ]] || cr_fail "no image ckpt-$newest.r1.img under $STASIS_DIR"
size=$(stat -c %s "$img")

case $mode in
missing)
	rm -f "$img"
	cr_ok "removed $img"
	;;
corrupt)
	cr_flip_byte "$img"
	;;
truncated)
	truncate -s $((size / 2)) "$img"
	cr_ok "truncated $img from $size to $((size / 2)) bytes"
	;;
*) cr_fail "unknown mode $mode" ;;
esac
before=$CR_TMP/before.snapshot
cr_snapshot "$before"

cr_restart restart
name=ckpt-$newest.r1
if [[ ${CR_STATUS[restart]} != 0 ]]; then
	cr_ok "restart failed (status ${CR_STATUS[restart]})"
	cr_expect_words restart "the error names the damaged file" stasis "$name"
	cr_expect_unchanged "$before"
	cr_pass "$mode image of checkpoint $newest: restart refused it, no file lost"
fi
cr_expect_words restart "the warning names the damaged file" stasis "$name"
resumed=$(grep -oE 'resumed from checkpoint [0-9]+' "$CR_TMP/restart.err" | grep -oE '[0-9]+$' | head -n 1)
[[ -n $resumed ]] || cr_fail "restart succeeded without saying where it resumed"
((resumed < newest)) || cr_fail "restart resumed from checkpoint $resumed despite the $mode image of $newest"
cr_expect_same restart
cr_pass "$mode image of checkpoint $newest: resumed from $resumed with a warning, same output"
