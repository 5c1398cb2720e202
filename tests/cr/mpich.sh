#!/bin/bash
# mpich.sh: a program of the MPI family stasis is not built for (heat built
# against MPICH, run by MPICH's hydra) is refused with one line naming both
# families, before anything runs or is written; never the abort inside MPI
# that preloading the Open MPI build into it gave (MPICH.md A.1). The same
# for an Open MPI program under MPICH's launcher, and for libstasis.so
# preloaded by hand, past stasis-run's check.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
command -v mpiexec.mpich >/dev/null || cr_skip "mpiexec.mpich not found (Debian's mpich)"
[[ -x $STASIS_BUILD/tests/apps/heat_mpich ]] || cr_skip "heat_mpich not built (libmpich-dev missing)"
CR_LAUNCHER=mpiexec.mpich
CR_NP=2
lib=$STASIS_BUILD/preload/libstasis.so

# MPICH itself works here: the refusals below are stasis's.
cr_app heat_mpich 64 50
# shellcheck disable=SC2046 # the launcher's words
cr_start plain $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
cr_wait_exit plain
cr_expect_status plain 0
grep -q '^heat: n=64 iters=50 checksum=' "$CR_TMP/plain.out" ||
	{ cr_show plain; cr_fail "heat_mpich without stasis printed no result"; }
cr_ok "heat_mpich runs under mpiexec.mpich without stasis"

# one_line NAME WORDS...: the job failed, its stderr is one line, with WORDS.
one_line() {
	local name=$1
	shift
	cr_expect_failure "$name"
	cr_expect_words "$name" "the refusal names both" "$@"
	if [[ $(wc -l <"$CR_TMP/$name.err") != 1 || -s $CR_TMP/$name.out ]]; then
		cr_show "$name"
		cr_fail "job $name printed more than the one line of its refusal"
	fi
	[[ -z $(ls -A "$STASIS_DIR") ]] || cr_fail "job $name wrote under $STASIS_DIR: $(ls -A "$STASIS_DIR")"
}

cr_run run
cr_wait_exit run
one_line run stasis-run heat_mpich "MPICH \(libmpich\.so\.12\)" "Open MPI \(libmpi\.so\.40\)"
cr_restart restart
one_line restart stasis-restart heat_mpich "MPICH \(libmpich\.so\.12\)" "Open MPI \(libmpi\.so\.40\)"

# An Open MPI program under MPICH's launcher.
cr_app heat 64 50
cr_run launcher
cr_wait_exit launcher
one_line launcher stasis-run "heat is linked against Open MPI" "launcher mpiexec\.mpich is MPICH's"

# libstasis.so preloaded by hand into the MPICH program: each rank stops at
# load with the line, not inside MPI_Comm_rank.
cr_app heat_mpich 64 50
# shellcheck disable=SC2046
cr_start preload env LD_PRELOAD="$lib" setarch "$(uname -m)" -R $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
cr_wait_exit preload
cr_expect_failure preload
cr_expect_words preload "each rank refuses at load" "MPICH \(libmpich\.so\.12\)" "built for Open MPI \(libmpi\.so\.40\)"
if grep -qi "fatal error\|invalid communicator" "$CR_TMP/preload.err"; then
	cr_show preload
	cr_fail "a rank reached MPI with the wrong family's handles"
fi
[[ -z $(ls -A "$STASIS_DIR") ]] || cr_fail "the preloaded ranks wrote under $STASIS_DIR"
cr_pass "MPICH programs refused with one line naming both families; nothing written"
