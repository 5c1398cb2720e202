#!/bin/bash
# twice.sh APP [ARGS...]: a restarted job must itself be checkpointable.
# Kill after two checkpoints, restart, kill the restarted job once it has
# committed a checkpoint of its own, restart again; the output must equal
# the uninterrupted run's.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app "${1:?usage: twice.sh APP [ARGS...]}" "${@:2}"
# Two kills and a restart that must commit a checkpoint of its own before
# the job ends: more room than a single round trip needs.
cr_reference 7

cr_run run
cr_wait_commits run 2
cr_kill run
first=$(cr_newest_complete)

cr_restart_bg restart1
cr_wait_line restart1 "resumed from checkpoint"
cr_expect_line restart1 "resumed from checkpoint $first\\b" "first restart resumed from $first"
cr_wait_commits restart1 1
second=$(cr_last_commit restart1)
((second > first)) || cr_fail "the restarted job committed checkpoint $second, not newer than $first"
cr_kill restart1
newest=$(cr_newest_complete)
((newest >= second)) || cr_fail "newest complete checkpoint on disk is $newest, but $second was committed"

cr_restart restart2
cr_expect_status restart2 0
cr_expect_line restart2 "resumed from checkpoint $newest\\b" "second restart resumed from $newest"
cr_expect_same restart2
cr_pass "killed twice (after checkpoints $first and $second), same output"
