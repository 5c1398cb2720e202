#!/bin/bash
# kill_during_write.sh [APP [ARGS...]]: a job killed while it writes a
# checkpoint must leave the previous complete one usable. The fault point
# stall-write:3 hangs the image write of checkpoint 3; kill then, restart,
# and require a resume from checkpoint 2 and the uninterrupted output.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app "${1:-heat}" "${@:2}"
cr_reference

STASIS_FAULT=stall-write:3 cr_run run
cr_wait_line run "checkpoint 2 committed"
cr_wait_line run "fault stall-write hit in checkpoint 3"
cr_ok "checkpoint 2 committed, checkpoint 3 stalled in its image write"
# Let the stalled write sit for a moment, as a real slow disk would.
sleep 0.5
cr_kill run

done3=$(find "$STASIS_DIR" -name 'ckpt-3.r*.done' | head -n 1)
[[ -z $done3 ]] || cr_fail "checkpoint 3 has a commit record ($done3) though its write never finished"
partial=$(find "$STASIS_DIR" -name 'ckpt-3.r*' | wc -l)
cr_ok "checkpoint 3 has no commit record ($partial partial file(s) on disk)"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint 2\\b" "restart resumed from checkpoint 2"
cr_expect_same restart
cr_pass "killed during the write of checkpoint 3, resumed from 2, same output"
