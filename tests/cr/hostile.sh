#!/bin/bash
# hostile.sh CASE: a checkpoint directory or file someone else could have
# made or changed is refused with one line naming it, and nothing is
# written through it.
# Directories (stasis-run must stop at MPI_Init, the program print
# nothing, and the directory pointed at or handed over stay empty):
#   dir-symlink     STASIS_DIR is a symbolic link (to a directory of ours)
#   job-symlink     the job directory STASIS_DIR/<job> is a symbolic link
#   dir-owner       STASIS_DIR is owned by another user
#   job-owner       the job directory is owned by another user
#   dir-writable    STASIS_DIR is writable by group and others (not sticky)
#   job-writable    the job directory is writable by its group
#   dotdot          STASIS_DIR has a '..' component
# Files of a checkpoint (the restart must refuse the newest checkpoint
# with one line naming the file and why, resume from the one before with
# the output of the whole run, and leave the file as it was):
#   image-owner     rank 1's newest image is owned by another user
#   image-mode      rank 1's newest image has mode 0644
#   image-symlink   rank 1's newest image is a symbolic link to a copy of
#                   itself (a valid image, refused all the same)
#   tmp-symlink     during a run, symbolic links to a file of ours wait at
#                   the names rank 1's next images are written under: those
#                   checkpoints fail, the run goes on, the file is untouched
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

case=${1:?usage: hostile.sh CASE}
export CR_NP=2
cr_setup
cr_app heat 256 4000
job=$(basename "$CR_APP")
other=65534 # nobody
outside=$CR_TMP/outside
mkdir -m 0700 "$outside"

# stasis-run must stop at MPI_Init with one line matching all of RE...,
# print nothing of the program, and leave $outside empty.
refused() {
	local what=$1
	shift
	STASIS_VERBOSE=0 cr_run_wait bad
	cr_expect_failure bad
	cr_expect_words bad "$what" "$@"
	n=$(grep -c '^stasis' "$CR_TMP/bad.err" || true)
	((n == 1)) || { cr_show bad; cr_fail "$n lines from stasis, one expected"; }
	[[ ! -s $CR_TMP/bad.out ]] || cr_fail "the program ran despite the refusal"
	[[ -z $(find "$outside" -mindepth 1 -print -quit) ]] || cr_fail "something was written through: $(find "$outside" -mindepth 1)"
	cr_pass "$case: refused with one line, nothing written through it"
}

case $case in
dir-symlink)
	ln -s "$outside" "$CR_TMP/link"
	STASIS_DIR=$CR_TMP/link refused "names STASIS_DIR and the link" 'STASIS_DIR' "$CR_TMP/link" 'symbolic link' refused
	;;
job-symlink)
	ln -s "$outside" "$STASIS_DIR/$job"
	refused "names the job directory and the link" 'STASIS_DIR' "job directory $STASIS_DIR/$job" 'symbolic link' refused
	;;
dir-owner)
	chown "$other" "$outside"
	STASIS_DIR=$outside refused "names STASIS_DIR and its owner" 'STASIS_DIR' "$outside" "owned by uid $other" refused
	;;
job-owner)
	mkdir -m 0700 "$STASIS_DIR/$job"
	chown "$other" "$STASIS_DIR/$job"
	outside=$STASIS_DIR/$job
	refused "names the job directory and its owner" 'STASIS_DIR' "job directory $STASIS_DIR/$job" "owner uid $other" refused
	;;
dir-writable)
	chmod 0777 "$outside"
	STASIS_DIR=$outside refused "names STASIS_DIR and its mode" 'STASIS_DIR' "$outside" 'writable by group or others \(mode 0777\)' refused
	;;
job-writable)
	mkdir -m 0700 "$STASIS_DIR/$job"
	chmod 0770 "$STASIS_DIR/$job"
	outside=$STASIS_DIR/$job
	refused "names the job directory and its mode" 'STASIS_DIR' "job directory $STASIS_DIR/$job" 'mode 0700 \(is 0770' refused
	;;
dotdot)
	STASIS_DIR=$outside/../outside refused "names STASIS_DIR and the '..'" 'STASIS_DIR' "'\\.\\.' component"
	;;
esac

# The files cases: a whole run under stasis, every 0.1 s, keeping 3: its
# output is the uninterrupted one the restarts must give, and it leaves
# checkpoints taken near its end, so that the restarts are short.
export STASIS_INTERVAL=0.1 STASIS_KEEP=3
if [[ $case == tmp-symlink ]]; then
	# The job must outlive the placing of the links by several intervals:
	# sized by timing the uninterrupted run, not by a guess of its speed.
	cr_reference 3
	echo "a file of ours" >"$outside/victim"
	before=$(sha256sum "$outside/victim")
	cr_run run
	cr_wait_commits run 1
	first=$(cr_last_commit run)
	# In one process: a thousand ln(1) forks take seconds on a loaded
	# machine, longer than the job has left.
	python3 -c 'import os, sys
for i in range(int(sys.argv[3]) + 1, int(sys.argv[3]) + 1000):
    os.symlink(sys.argv[1], "%s/ckpt-%d.r1.img.tmp" % (sys.argv[2], i))' \
		"$outside/victim" "$STASIS_DIR/$job" "$first"
	cr_alive run || cr_fail "the job ended before the links were in place: nothing was tested"
	cr_wait_exit run
	cr_expect_status run 0
	cr_expect_same run
	cr_expect_line run "^stasis\\[1\\]: checkpoint [0-9]+: cannot write $STASIS_DIR/$job/ckpt-[0-9]+\\.r1\\.img: Too many levels of symbolic links" "rank 1 refused to write through a link"
	cr_expect_line run "^stasis\\[0\\]: warning: checkpoint [0-9]+ failed on some rank" "the checkpoint failed, the run went on"
	[[ $(sha256sum "$outside/victim") == "$before" ]] || cr_fail "the file the links point to changed"
	cr_pass "$case: no image written through a link, the run went on with the uninterrupted output"
fi

cr_app heat 256 4000
for ((try = 1; ; try++)); do
	rm -rf "${STASIS_DIR:?}"/*
	cr_run_wait whole
	cr_expect_status whole 0
	(($(cr_commits whole) >= 3)) && break
	((try < 5)) || cr_fail "the run took $(cr_commits whole) checkpoints"
	CR_ARGS[1]=$((CR_ARGS[1] * 2))
done
cp "$CR_TMP/whole.out" "$CR_TMP/ref.out"
newest=$(cr_newest_complete)
img=$(cr_ckpt_file "$newest" 1 img)
case $case in
image-owner) chown "$other" "$img" && why="is owned by uid $other, not by you: refused" ;;
image-mode) chmod 0644 "$img" && why="has mode 0644, stasis writes 0600: refused" ;;
image-symlink)
	cp -p "$img" "$outside/copy.img"
	ln -sf "$outside/copy.img" "$img"
	why="is a symbolic link: refused"
	;;
*) cr_fail "unknown case $case" ;;
esac
before=$CR_TMP/before.snapshot
cr_snapshot "$before" "$outside"
stat -c '%U %a %s %Y' "$img" >"$CR_TMP/img.before"
# No checkpoint of its own: retention would remove the refused file, whose
# being left as it was is checked below (on a loaded machine the restart
# ran long enough to commit several).
STASIS_INTERVAL=3600 cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "^stasis\\[1\\]: warning: checkpoint $newest cannot be used: ${img//./\\.} $why\$" "the newest checkpoint refused with one line naming the file"
resumed=$(grep -oE 'resumed from checkpoint [0-9]+' "$CR_TMP/restart.err" | grep -oE '[0-9]+$')
((resumed < newest)) || cr_fail "resumed from $resumed, not from one before $newest"
cr_expect_same restart
cmp -s "$CR_TMP/img.before" <(stat -c '%U %a %s %Y' "$img") || cr_fail "the refused file changed"
cr_expect_unchanged "$before" "$outside"
cr_pass "$case: refused, resumed from $resumed with the output of the whole run, the file left as it was"
