#!/bin/bash
# roundtrip.sh APP [ARGS...]: the core check. Run APP uninterrupted, run it
# again under stasis-run, SIGKILL the whole job after two committed
# checkpoints, restart it, and require the restarted run to resume from the
# newest complete checkpoint and print exactly what the uninterrupted run
# printed.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app "${1:?usage: roundtrip.sh APP [ARGS...]}" "${@:2}"
cr_reference

cr_run run
cr_wait_commits run 2
cr_kill run
newest=$(cr_newest_complete)
[[ -n $newest ]] || cr_fail "no complete checkpoint on disk after two commits"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from the newest complete checkpoint ($newest)"
cr_expect_same restart
cr_pass "$(basename "$CR_APP"): killed after 2 checkpoints, restarted from $newest, same output"
