#!/bin/bash
# agree.sh APP [ARGS...]: checkpoints every 0.1 s (STASIS_INTERVAL, unless
# set) of a program whose ranks wait for one another in every way (receives
# from MPI_ANY_SOURCE, Waitall, collectives on several communicators): the
# ranks must always agree where to stop or give up and run on (mpi/coord.h),
# never hang. The job is killed after CHECKPOINTS commits (default 3) and
# restarted; the restart, checkpointed as often, must run to its end within
# the timeout (a hang fails it), resume from the newest complete checkpoint
# and print what the uninterrupted run printed.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export STASIS_INTERVAL=${STASIS_INTERVAL:-0.1} STASIS_VERBOSE=1
CR_TIMEOUT=${CR_TIMEOUT:-90}
cr_setup
cr_app "${1:?usage: agree.sh APP [ARGS...]}" "${@:2}"
cr_reference 3
n=${CHECKPOINTS:-3}

cr_kill_restart_same "$n"
newest=$CR_NEWEST
after=$(cr_commits restart)
((after >= 1)) || { cr_show restart; cr_fail "the restarted run committed no checkpoint at STASIS_INTERVAL=$STASIS_INTERVAL"; }
abandoned=$(cat "$CR_TMP/run.err" "$CR_TMP/restart.err" | grep -c "abandoned after" || true)
cr_pass "$(basename "$CR_APP"): $n checkpoints at ${STASIS_INTERVAL}s, killed, restarted from $newest to the end with $after more, same output ($abandoned attempts abandoned)"
