#!/bin/bash
# dirty_io.sh APP [COMMITS [ARGS...]]: memory the kernel or another process
# writes (read(), MPI receives over shared memory) under the tracking
# backend of STASIS_DIRTY (meson sets mprotect, whose write protection makes
# such writes fail with EFAULT unless stasis unprotects the buffer first).
#  1. An uninterrupted stasis-run must print exactly what the plain run
#     prints, and nothing may report EFAULT (errno 14, "Bad address") on
#     stderr: Open MPI's CMA path prints "Read -1, expected N, errno = 14"
#     and falls back to a slower protocol, which would hide the failure
#     from the output alone.
#  2. Killed after COMMITS (default 3) commits and restarted, the same.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

app=${1:?usage: dirty_io.sh APP [COMMITS [ARGS...]]}
want=${2:-3}
cr_setup
cr_say "STASIS_DIRTY=${STASIS_DIRTY:-auto}"
cr_app "$app" "${@:3}"
cr_reference $((want + 3))

EFAULT_RE='errno[ =]+14\b|EFAULT|Bad address'

no_efault() {
	local name=$1 line
	if line=$(grep -m 1 -E -- "$EFAULT_RE" "$CR_TMP/$name.err"); then
		cr_show "$name"
		cr_fail "job $name hit EFAULT: $line"
	fi
	cr_ok "job $name reported no EFAULT"
}

cr_run_wait whole
cr_expect_status whole 0
(($(cr_commits whole) >= 2)) || cr_fail "the uninterrupted stasis run committed only $(cr_commits whole) checkpoints"
cr_expect_same whole
no_efault whole

cr_run run
cr_wait_commits run "$want"
cr_kill run
no_efault run
newest=$(cr_newest_complete)
[[ -n $newest ]] || cr_fail "no complete checkpoint on disk after $want commits"
# The uninterrupted run's checkpoints are still there, older: the restart
# must resume the killed run, not the end of the other one.
((newest >= $(cr_last_commit run))) ||
	cr_fail "newest complete checkpoint $newest is older than the killed run's last commit $(cr_last_commit run)"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from the newest complete checkpoint ($newest)"
no_efault restart
cr_expect_same restart
cr_pass "$(basename "$CR_APP") under STASIS_DIRTY=${STASIS_DIRTY:-auto}: no EFAULT, uninterrupted and restarted runs print the same"
