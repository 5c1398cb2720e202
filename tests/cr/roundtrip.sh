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

cr_kill_restart_same 2
newest=$CR_NEWEST
cr_pass "$(basename "$CR_APP"): killed after 2 checkpoints, restarted from $newest, same output"
