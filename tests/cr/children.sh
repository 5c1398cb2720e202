#!/bin/bash
# children.sh: a program that runs other programs while it computes
# (tests/apps/children.c: system(), popen() read and write, fork() with a
# dup2() before exec) is checkpointed, killed and restarted to the output of
# an uninterrupted run. A pipe to a child held checkpoints back only while
# it was open (popen() once switched them off for the rest of the run), and
# the children, which inherit the rank's environment, never took
# themselves for ranks (each shell of a system() said its dup2() switched
# checkpoints off).
#   children.sh deferred: a checkpoint put off by an open pipe is tried
#   again a second later, not a whole interval.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export STASIS_INTERVAL=${STASIS_INTERVAL:-0.2} STASIS_VERBOSE=1
cr_setup
if [[ ${1:-} == deferred ]]; then
	# A pipe held open over the first 5 s of a 7.5 s run, checkpoints every
	# 4 s: the one due at 4 s is put off, and tried again each second (not
	# a whole interval later, after the run ended), so one commits.
	export STASIS_INTERVAL=4
	cr_app children 4096 400 5 7.5
	cr_run_wait run
	cr_expect_status run 0
	cr_expect_words run "the put-off checkpoint is said" '^stasis' 'checkpoint skipped' 'pipe to another process'
	commits=$(cr_commits run)
	((commits >= 1)) || { cr_show run; cr_fail "no checkpoint after the pipe closed: the one put off waited a whole interval"; }
	cr_pass "deferred: put off while the pipe was open, $commits committed after it closed"
fi
cr_app children
cr_reference 3
cr_kill_restart_same 3
after=$(cr_commits restart)
((after >= 2)) || { cr_show restart; cr_fail "the restarted run committed $after checkpoints: children held them back"; }
for job in run restart; do
	if grep -q "skipped from now on\|^stasis: warning" "$CR_TMP/$job.err"; then
		cr_show "$job"
		cr_fail "job $job: a child of a rank spoke for stasis, or checkpoints were switched off"
	fi
done
cr_pass "children: checkpoints between the children's runs ($after after the restart), none switched off, same output"
