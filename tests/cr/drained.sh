#!/bin/bash
# drained.sh APP [ARGS...]: messages in flight are drained, not waited for
# (mpi/drain.h). APP keeps thousands of small messages on their way most of
# the time (flood); at least one checkpoint must have been taken with
# messages in flight ("N messages in flight drained"), and a restart from the newest
# checkpoint must give the uninterrupted output, every message in order.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app "${1:?usage: drained.sh APP [ARGS...]}" "${@:2}"
cr_reference

cr_run run
cr_wait_line run 'messages in flight drained'
cr_wait_commits run 2
cr_kill run
cr_expect_line run 'checkpoint [0-9]+: [1-9][0-9]* messages in flight drained' \
	"a checkpoint was taken with messages in flight"
newest=$(cr_newest_complete)
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "the restart resumed from $newest"
cr_expect_same restart
cr_pass "$(basename "$CR_APP"): checkpoints drained messages in flight; the restart gave the same output"
