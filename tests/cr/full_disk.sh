#!/bin/bash
# full_disk.sh room|none [APP [ARGS...]]: STASIS_DIR on a small filesystem
# (a tmpfs with size=, sized by measuring one checkpoint of the job).
#   room  room for 2.5 checkpoints with STASIS_KEEP=2: without help every
#         checkpoint after the second would fail for the rest of the run.
#         stasis must write full images in place of chains it could never
#         replace, remove older checkpoints the newest does not need when
#         the disk is full, and so commit every checkpoint it attempts; it
#         says once that it made room.
#   none  room for 1.5 checkpoints: after the first, nothing more fits.
#         stasis must keep the first, say once at rank 0 how old it is and
#         why no newer one could be written, and let the run go on.
# Either way the run ends with the uninterrupted answer, and a restart
# from what it left on the small disk ends with it too.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: full_disk.sh room|none [APP [ARGS...]]}
shift
cr_setup
((EUID == 0)) || cr_skip "mounting a small tmpfs needs root"
cr_app "${@:-heat}"
cr_reference 5
export STASIS_KEEP=2

# One full checkpoint of the whole job, in bytes, as stasis reports it.
cr_run measure
cr_wait_commits measure 1
cr_kill measure
full=$(grep -oE 'checkpoint [0-9]+ committed: full, [0-9]+ bytes' "$CR_TMP/measure.err" | head -n 1 | grep -oE '[0-9]+ bytes' | grep -oE '[0-9]+')
[[ -n $full ]] || cr_fail "no size in the first commit line of the measuring run"
rm -rf "${STASIS_DIR:?}"/*
case $mode in
room) size=$((full * 5 / 2)) ;;
none) size=$((full * 3 / 2)) ;;
*) cr_fail "unknown mode $mode" ;;
esac
# Pages for the small files (commit records, locks) of 4 ranks.
size=$(((size + 64 * 4096 + 4095) / 4096 * 4096))
disk=$CR_TMP/disk
mkdir -p "$disk"
mount -t tmpfs -o "size=$size,mode=0700" stasis-cr-disk "$disk" || cr_skip "cannot mount a tmpfs here"
CR_AT_EXIT+=("umount -l '$disk'")
export STASIS_DIR=$disk
cr_ok "a checkpoint is $full bytes; STASIS_DIR on a tmpfs of $size bytes (STASIS_KEEP=$STASIS_KEEP)"

cr_run_wait run
cr_expect_status run 0
cr_expect_same run
commits=$(cr_commits run)
warnings=$(grep -cE 'stasis(\[[0-9]+\])?: warning: checkpoint [0-9]+ could not be written, the disk is full' "$CR_TMP/run.err" || true)
if [[ $mode == room ]]; then
	((commits >= 4)) || cr_fail "only $commits checkpoints committed: the disk never filled"
	failed=$(grep -cE 'failed on some rank|could not be written' "$CR_TMP/run.err" || true)
	((failed == 0)) || { cr_show run; cr_fail "$failed checkpoint(s) failed although room could be made"; }
	cr_expect_line run '^stasis\[0\]: warning: checkpoint [0-9]+: the disk was full; removed older checkpoints' "rank 0 said once that it made room"
	n=$(grep -c 'the disk was full; removed older' "$CR_TMP/run.err")
	((n == 1)) || cr_fail "said $n times that it made room, once expected"
	cr_ok "$commits checkpoints committed, none failed, on a disk with room for 2.5"
else
	((commits >= 1)) || cr_fail "no checkpoint committed"
	((warnings == 1)) || { cr_show run; cr_fail "$warnings warnings that the disk is full, one expected"; }
	cr_expect_words run "rank 0 says once how old the newest checkpoint is and why" \
		'^stasis\[0\]: warning: checkpoint [0-9]+ could not be written' 'no space left on device' \
		'newest complete checkpoint, [0-9]+, is [0-9.]+ (s|min|h) old'
	(($(grep -ciE 'no space left' "$CR_TMP/run.err") == 1)) || cr_fail "the full disk was reported more than once"
fi
newest=$(cr_newest_complete)
[[ -n $newest ]] || cr_fail "no complete checkpoint left on the small disk"
cr_ok "newest complete checkpoint on the small disk: $newest ($(df -B1 --output=used "$disk" | tail -n 1) bytes used)"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from $newest"
cr_expect_same restart
cr_pass "$mode: a disk with room for ${size} bytes, the run and its restart give the uninterrupted output"
