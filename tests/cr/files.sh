#!/bin/bash
# files.sh MODE [KIND...]: a program that keeps files open across checkpoints
# (tests/apps/files.c). It works in its current directory: the uninterrupted
# run in ref/, the run under stasis and its restarts in run/, each with the
# same input files.in. Besides the output, every file the program wrote (its
# logs and data files) must equal the uninterrupted run's, byte for byte.
#   roundtrip  killed after two checkpoints, restarted
#   twice      killed, restarted, killed again after a checkpoint of the
#              restarted job, restarted again
#   early      the data file opened (O_TRUNC) before MPI_Init, which a
#              restart runs again before its checkpoint is put back
#   changed    the read-only input is changed before the restart: the
#              restart stops with one line naming it and changes nothing;
#              once the change is undone the restart resumes
#   removed    the same with the input moved away, then back
#   taken      the restart's rank holds descriptor 3 before stasis loads
#              (a launcher that leaks it): the restart stops with one line
#              instead of taking it; without it the restart resumes
#   overwrite  the program rewrites a record of its data file in place
#              every iteration and reads it back first, and appends a line
#              to a journal it opens and closes every iteration: killed
#              after two checkpoints, the restart puts the record back from
#              the undo record (process/undo.h) and cuts the journal back to
#              its length at the checkpoint; same output, same files
#   undo-max   the same with STASIS_UNDO_MAX too small for one record:
#              stasis says so naming the file and the limit, takes no more
#              checkpoints, the run ends right, and a restart from the
#              checkpoints before stops with one line
#   lost-node  each rank a node of its own (xor): killed after two
#              checkpoints, rank 1's node (its checkpoint files and undo
#              records) lost: the restart rebuilds its images, warns for
#              each file of rank 1 open for writing that bytes overwritten
#              in place since cannot be put back (no redundancy holds undo
#              records), and resumes; same output, same files (this
#              program only appends and writes past the checkpoint's end)
#   nameless-max  STASIS_DELETED_MAX smaller than the program's files
#              without a name: stasis names one and the limit, takes no
#              checkpoint, the run ends right
#   refuse KIND...  for each KIND, the program makes something stasis
#              cannot restore (files.c --refuse): a warning names it, no
#              checkpoint is taken, the run ends with the right answer
# FILES_APP=files_f runs the Fortran twin (tests/apps/files_f.f90, units
# through libgfortran) instead; FILES_APP=mpiio the MPI-IO one
# (tests/apps/mpiio.c: a shared file written with a view, an input read
# and logs written through file pointers).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: files.sh roundtrip|twice|early|changed|removed|taken|overwrite|undo-max|nameless-max|refuse [KIND...]}
cr_setup
# The uninterrupted run's files are compared: it runs here, never shared.
export CR_REF_SHARED=0
extra=()
case $mode in
early) extra=(--early) ;;
overwrite) extra=(--overwrite) ;;
undo-max)
	extra=(--overwrite)
	export STASIS_UNDO_MAX=100
	;;
nameless-max)
	# The O_TMPFILE file alone holds 16 KiB, the deleted one more.
	export STASIS_DELETED_MAX=16K
	;;
lost-node)
	export STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=1 STASIS_SET_SIZE=4
	export STASIS_DIR=$CR_TMP/ckpt/node%n
	;;
esac
app=${FILES_APP:-files}
# Each collective MPI-IO call allocates OMPIO's aggregation buffer (32 MiB)
# and MALLOC_PERTURB_, which meson sets, fills it: keep it small.
export OMPI_MCA_io_ompio_bytes_per_agg=1048576
# shellcheck disable=SC2046 # the default arguments are words
cr_app "$app" $(cr_default_args "$app") "${extra[@]}"

ref=$CR_TMP/ref
run=$CR_TMP/run
mkdir -p "$ref" "$run"
awk 'BEGIN { for (i = 0; i < 997; i++) printf "%.6f\n", sin(i) * 100 }' >"$ref/files.in"
cp -p "$ref/files.in" "$run/files.in"
cd "$ref"
if [[ $mode == refuse ]]; then cr_reference 1; else cr_reference 6; fi
cd "$run"

# Every file the uninterrupted run wrote, equal in run/.
expect_same_files() {
	local f n=0
	for f in "$ref"/files.log.* "$ref"/files.data.* "$ref"/files.journal.* "$ref"/files.new.*; do
		[[ -e $f ]] || continue # no journal without --overwrite, no new files but Fortran's
		cmp -s "$f" "$run/${f##*/}" || {
			cmp "$f" "$run/${f##*/}" || true
			cr_fail "${f##*/} differs from the uninterrupted run's"
		}
		n=$((n + 1))
	done
	cr_ok "the $n files the program wrote are identical to the uninterrupted run's"
}

# What the program wrote, as the killed run left it (an error must not cut
# it back either).
written_snapshot() {
	(cd "$run" && sha256sum files.log.* files.data.*) >"$1"
}

kill_after() {
	cr_run run
	cr_wait_commits run "$1"
	cr_kill run
}

case $mode in
roundtrip | early)
	kill_after 2
	newest=$(cr_newest_complete)
	cr_restart restart
	cr_expect_status restart 0
	cr_expect_line restart "resumed from checkpoint $newest\\b" "resumed from the newest checkpoint"
	cr_expect_same restart
	expect_same_files
	cr_pass "$mode: killed after 2 checkpoints, restarted: same output, same files"
	;;
twice)
	kill_after 2
	cr_restart_bg restart1
	cr_wait_line restart1 "resumed from checkpoint"
	cr_wait_commits restart1 1
	cr_kill restart1
	cr_restart restart2
	cr_expect_status restart2 0
	cr_expect_same restart2
	expect_same_files
	cr_pass "killed twice: same output, same files"
	;;
changed | removed | taken)
	kill_after 2
	cr_snapshot "$CR_TMP/ckpt.before"
	written_snapshot "$CR_TMP/written.before"
	case $mode in
	changed)
		size=$(stat -c %s files.in)
		mtime=$(stat -c %y files.in)
		echo 1.5 >>files.in
		words=(files.in changed)
		;;
	removed)
		mv files.in files.in.away
		words=(files.in missing)
		;;
	taken)
		# The first descriptor the program opened after MPI_Init.
		words=('descriptor 3' held)
		;;
	esac
	if [[ $mode == taken ]]; then
		# shellcheck disable=SC2016,SC2046 # $0 and $@ are the inner shell's
		cr_start restart1 "$CR_STASIS_RESTART" $(cr_mpirun) sh -c 'exec 3</dev/null; exec "$0" "$@"' \
			"$CR_APP" "${CR_ARGS[@]}"
		cr_wait_exit restart1
	else
		cr_restart restart1
	fi
	cr_expect_failure restart1
	cr_expect_words restart1 "one line names the cause" '^stasis' "${words[@]}"
	n=$(grep -c '^stasis.*checkpoint [0-9]*: ' "$CR_TMP/restart1.err" || true)
	((n == 1)) || cr_fail "$n ranks printed the cause, one should"
	cr_expect_unchanged "$CR_TMP/ckpt.before"
	written_snapshot "$CR_TMP/written.after"
	cmp -s "$CR_TMP/written.before" "$CR_TMP/written.after" ||
		cr_fail "the files the program wrote changed although the restart stopped"
	cr_ok "the files the program wrote are as the killed run left them"
	case $mode in
	changed)
		truncate -s "$size" files.in
		touch -d "$mtime" files.in
		;;
	removed) mv files.in.away files.in ;;
	esac
	cr_restart restart2
	cr_expect_status restart2 0
	cr_expect_same restart2
	expect_same_files
	cr_pass "$mode: the restart stopped with one line, lost nothing, and resumed once the cause was gone"
	;;
overwrite)
	kill_after 2
	newest=$(cr_newest_complete)
	undo=$(find "$STASIS_DIR" -name '*.undo' -size +0 | wc -l)
	((undo > 0)) || cr_fail "no undo record was written"
	cr_ok "$undo undo records on disk"
	cr_restart restart
	cr_expect_status restart 0
	cr_expect_line restart "resumed from checkpoint $newest\\b" "resumed from the newest checkpoint"
	cr_expect_same restart
	expect_same_files
	cr_pass "overwrite: written in place, killed, restarted: same output, same files"
	;;
lost-node)
	kill_after 2
	newest=$(STASIS_DIR=$CR_TMP/ckpt cr_newest_complete)
	rm -rf "$CR_TMP/ckpt/node1"
	cr_restart restart
	cr_expect_status restart 0
	cr_expect_line restart "resumed from checkpoint $newest\\b" "resumed from the newest checkpoint"
	cr_expect_line restart 'rebuilt lost or damaged images' "rank 1's images were rebuilt"
	cr_expect_words restart "rank 1's data file is named" '^stasis' 'files\.data\.1' 'in place' 'undo record was lost'
	cr_expect_same restart
	expect_same_files
	cr_pass "lost-node: rank 1's node lost, rebuilt, warned for its written files: same output, same files"
	;;
undo-max)
	cr_run_wait run
	cr_expect_status run 0
	cr_expect_same run
	expect_same_files
	cr_expect_words run "stasis names the file and the limit" '^stasis' 'files\.data\.' 'written in place' 'STASIS_UNDO_MAX=100'
	newest=$(cr_newest_complete)
	[[ -n $newest ]] || cr_fail "no checkpoint was committed before the program wrote in place"
	cr_snapshot "$CR_TMP/ckpt.before"
	cr_restart restart
	cr_expect_failure restart
	cr_expect_words restart "the restart names the file" '^stasis' 'files\.data\.' "written in place after checkpoint $newest"
	cr_expect_unchanged "$CR_TMP/ckpt.before"
	cr_pass "undo-max: warned, no checkpoint after, same output; the restart of an earlier checkpoint stopped"
	;;
nameless-max)
	cr_run_wait run
	cr_expect_status run 0
	cr_expect_same run
	expect_same_files
	cr_expect_words run "stasis names the file and the limit" '^stasis' 'without a name' 'STASIS_DELETED_MAX=16384'
	commits=$(cr_commits run)
	((commits == 0)) || cr_fail "$commits checkpoints were taken past STASIS_DELETED_MAX"
	cr_pass "nameless-max: named with the limit, no checkpoint, same output and files"
	;;
refuse)
	shift
	(($# > 0)) || cr_fail "refuse: name the kinds"
	for kind in "$@"; do
		case $kind in
		fifo) re=FIFO ;;
		socketpair) re='socket.*other end is not the program' ;;
		inotify) re='inotify.*added in a way stasis did not see' ;;
		device) re=/dev/ptmx ;;
		stdout) re='standard output' ;;
		*) re=$kind ;;
		esac
		mkdir -p "$CR_TMP/$kind"
		cp -p "$ref/files.in" "$CR_TMP/$kind/"
		cd "$CR_TMP/$kind"
		# shellcheck disable=SC2046
		cr_start "$kind" "$CR_STASIS_RUN" $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}" --refuse "$kind"
		cr_wait_exit "$kind"
		cr_expect_status "$kind" 0
		cr_expect_same "$kind"
		cr_expect_words "$kind" "$kind is named" '^stasis' "$re"
		commits=$(cr_commits "$kind")
		((commits == 0)) || cr_fail "$commits checkpoints were taken with a $kind open"
	done
	cr_pass "refused $*: named, no checkpoint, same output"
	;;
*) cr_fail "unknown mode $mode" ;;
esac
