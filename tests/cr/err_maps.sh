#!/bin/bash
# err_maps.sh MODE: a restart checks the process it puts the image into
# before it writes anything (process/maps.h), and stops with one line naming
# what is not in place; the checkpoint files stay as they were, and a
# restart in the right setting still resumes them.
#   library-moved    tests/apps/uselib's own library (libstasis_step.so) is
#                    found in another directory at the restart, the same
#                    file: the restart must resume, same output
#   library-changed  the restart finds another build of that library (same
#                    layout, other code) at the same address: refused
#   stack-limit      the checkpoints hold 4 MiB of main stack (uselib
#                    --deep) and the restart runs under ulimit -s 2048:
#                    refused, naming the stack limit
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: err_maps.sh library-moved|library-changed|stack-limit}
cr_setup
apps=$STASIS_BUILD/tests/apps
base_path=${LD_LIBRARY_PATH:-}

# with_library DIR: the library is found in DIR from now on.
with_library() {
	export LD_LIBRARY_PATH=$1${base_path:+:$base_path}
}

case $mode in
library-moved | library-changed)
	mkdir -p "$CR_TMP/a" "$CR_TMP/b"
	cp "$apps/libstasis_step.so" "$CR_TMP/a/"
	if [[ $mode == library-moved ]]; then
		cp "$apps/libstasis_step.so" "$CR_TMP/b/"
	else
		cp "$apps/libstasis_step_b.so" "$CR_TMP/b/libstasis_step.so"
	fi
	with_library "$CR_TMP/a"
	cr_app uselib
	cr_reference
	cr_prepare_checkpoints 2
	before=$CR_TMP/before.snapshot
	cr_snapshot "$before"
	with_library "$CR_TMP/b"
	cr_restart restart
	if [[ $mode == library-moved ]]; then
		cr_expect_status restart 0
		cr_expect_line restart "resumed from checkpoint $CR_NEWEST\\b" "the restart resumed from $CR_NEWEST"
		cr_expect_same restart
		cr_pass "the same library found elsewhere: resumed, same output"
	fi
	cr_expect_failure restart
	cr_expect_words restart "the restart names the library" '^stasis' 'libstasis_step\.so' 'not the file|another file'
	if grep -q "resumed from checkpoint" "$CR_TMP/restart.err"; then
		cr_fail "the restart resumed with another build of the program's library"
	fi
	cr_expect_unchanged "$before"
	with_library "$CR_TMP/a"
	;;
stack-limit)
	cr_app uselib 4096 2000 --deep 4096
	cr_reference
	cr_prepare_checkpoints 2
	before=$CR_TMP/before.snapshot
	cr_snapshot "$before"
	limit=$(ulimit -S -s)
	ulimit -S -s 2048
	cr_restart restart
	ulimit -S -s "$limit"
	cr_expect_failure restart
	cr_expect_words restart "the restart names the stack limit" '^stasis' 'stack' 'ulimit -s 2048'
	cr_expect_unchanged "$before"
	;;
*)
	cr_fail "unknown mode $mode"
	;;
esac
# Nothing was lost: in the right setting the same checkpoint resumes.
cr_restart again
cr_expect_status again 0
cr_expect_line again "resumed from checkpoint $CR_NEWEST\\b" "a restart in the right setting resumed from $CR_NEWEST"
cr_expect_same again
cr_pass "$mode: refused with one line, files kept, resumed in the right setting"
