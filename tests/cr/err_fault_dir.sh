#!/bin/bash
# err_fault_dir.sh: STASIS_FAULT is checked like every other variable (a
# value that is not a list of <point>:<checkpoint id>[@<rank>] with known
# points stops the run at MPI_Init with one line naming STASIS_FAULT, the
# value and the points), and a STASIS_DIR that cannot be created stops it
# with one line naming STASIS_DIR.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export CR_NP=2
cr_setup
cr_app heat 256 100
export STASIS_VERBOSE=0

one_line() {
	local name=$1 n
	cr_expect_failure "$name"
	[[ ! -s $CR_TMP/$name.out ]] || cr_fail "the program ran despite the bad value"
	n=$(grep -c '^stasis' "$CR_TMP/$name.err" || true)
	((n == 1)) || { cr_show "$name"; cr_fail "$n lines from stasis, one expected"; }
}

i=0
for bad in bogus stall-write: fail-write:x fail-write:0 'fail-write:3,' 'fail-write:3@x'; do
	i=$((i + 1))
	STASIS_FAULT=$bad cr_run_wait "fault$i"
	one_line "fault$i"
	cr_expect_words "fault$i" "STASIS_FAULT='$bad' refused" '^stasis\[0\]: STASIS_FAULT' \
		"'${bad//./\\.}'" 'fail-rebuild-run'
done
[[ -z $(find "$STASIS_DIR" -name 'ckpt-*' -print -quit) ]] || cr_fail "a checkpoint file was written"

STASIS_DIR=/proc/nonexistent/x cr_run_wait dir
one_line dir
cr_expect_words dir "the STASIS_DIR it cannot create named" '^stasis\[0\]: STASIS_DIR: cannot create /proc/nonexistent/x' 'no such file or directory'
cr_pass "bad STASIS_FAULT values and an impossible STASIS_DIR: one line each, naming the variable"
