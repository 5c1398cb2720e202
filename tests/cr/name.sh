#!/bin/bash
# name.sh: a rank looks like itself. A rank started without stasis-run's
# setarch (as a remote launcher starts it) re-executes itself through
# /proc/self/exe with address randomisation off; its name (ps -o comm=,
# /proc/PID/comm) must stay the program's, not "exe", and its command line
# the one it was started with. Then the same for the ranks of a restart.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
cr_app evloop
app=${CR_APP##*/}

# check_ranks NAME: every rank of job NAME named $app with its arguments.
check_ranks() {
	local name=$1 pid n=0 comm cmd want
	want="$CR_APP ${CR_ARGS[*]}"
	for pid in $(cr_job_pids "$name"); do
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$CR_APP" ]] || continue
		comm=$(ps -o comm= -p "$pid") || continue
		[[ $comm == "$app" ]] || cr_fail "rank $pid of job $name is named '$comm', not '$app'"
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
		[[ ${cmd% } == "$want" ]] || cr_fail "rank $pid of job $name shows the command line '$cmd', not '$want'"
		n=$((n + 1))
	done
	((n == CR_NP)) || cr_fail "found $n ranks of job $name running $CR_APP, not $CR_NP"
	cr_ok "the $n ranks of job $name are named $app with their command line"
}

# Without setarch: the ranks re-execute themselves.
# shellcheck disable=SC2046
cr_start run env LD_PRELOAD="$STASIS_BUILD/preload/libstasis.so" STASIS_RESTART=0 \
	$(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
cr_wait_commits run 1
check_ranks run
cr_kill run
