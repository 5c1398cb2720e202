#!/bin/bash
# segv.sh handler|crash: a program with SIGSEGV business of its own under
# the tracking backend of STASIS_DIRTY (meson sets mprotect, whose SIGSEGV
# handler must stay first and chain to the program's, DESIGN.md section 4).
#   handler  tests/apps/segv_handler write-protects pages of its own (a
#            static page, an anonymous mapping) and takes the fault on
#            purpose every iteration. An uninterrupted stasis-run that
#            checkpoints must print exactly what the plain run prints: the
#            same fault count, i.e. the program's handler ran every time.
#   crash    segv_handler --crash writes through NULL with no handler
#            installed: under stasis-run, with checkpoints already taken (so
#            tracking is armed), the rank must die of SIGSEGV like in the
#            plain run, within the timeout: neither hang nor be swallowed.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: segv.sh handler|crash}
cr_setup
cr_say "STASIS_DIRTY=${STASIS_DIRTY:-auto}"

case $mode in
handler)
	cr_app segv_handler "${@:2}"
	cr_reference
	# The plain run must itself show every fault, or the test tests nothing.
	grep -qE 'faults=([0-9]+) expected=\1 ' "$CR_TMP/ref.out" ||
		cr_fail "the plain run did not count every fault: $(cat "$CR_TMP/ref.out")"
	cr_run_wait whole
	cr_expect_status whole 0
	(($(cr_commits whole) >= 2)) ||
		cr_fail "the stasis run committed only $(cr_commits whole) checkpoints: tracking was hardly armed"
	cr_ok "the stasis run committed $(cr_commits whole) checkpoints"
	cr_expect_same whole
	cr_pass "the program's SIGSEGV handler ran every time under stasis: $(cat "$CR_TMP/whole.out")"
	;;
crash)
	cr_app segv_handler --crash "${@:2}"
	# Signal 11 as mpirun reports a rank that died of it.
	segv_re='signal 11|Segmentation fault'
	# shellcheck disable=SC2046
	cr_start ref $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
	cr_wait_exit ref 60
	cr_expect_failure ref
	cr_expect_line_ci ref "$segv_re" "the plain run's rank died of SIGSEGV"
	cr_run crash
	# A swallowed fault re-runs the write forever: a hang, caught here.
	cr_wait_exit crash 60
	cr_expect_failure crash
	cr_expect_line crash 'writing through NULL' "the program reached the NULL write"
	(($(cr_commits crash) >= 2)) ||
		cr_fail "no checkpoint was committed before the crash: tracking was not armed"
	cr_ok "$(cr_commits crash) checkpoints were committed before the crash"
	cr_expect_line_ci crash "$segv_re" "under stasis the rank died of SIGSEGV too"
	cr_pass "a NULL write under stasis-run kills the rank with SIGSEGV (status ${CR_STATUS[crash]})"
	;;
*)
	cr_fail "unknown mode $mode"
	;;
esac
