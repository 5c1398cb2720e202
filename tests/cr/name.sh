#!/bin/bash
# name.sh: a rank looks like itself. A rank started without stasis-run's
# setarch (as a remote launcher starts it) re-executes itself through
# /proc/self/exe with address randomisation off; its name (ps -o comm=,
# /proc/PID/comm) must stay the program's, not "exe", its command line the
# one it was started with, its /proc/PID/environ its job's. Then the same
# for the ranks of a restart, whose restored stack covers the strings the
# kernel shows.
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
		[[ $name != run ]] || grep -qzx STASIS_REEXEC=1 "/proc/$pid/environ" ||
			cr_fail "rank $pid of job $name did not re-execute itself"
		comm=$(ps -o comm= -p "$pid") || continue
		[[ $comm == "$app" ]] || cr_fail "rank $pid of job $name is named '$comm', not '$app'"
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
		[[ ${cmd% } == "$want" ]] || cr_fail "rank $pid of job $name shows the command line '$cmd', not '$want'"
		grep -qzx "CR_JOB=$CR_TMP/$name" "/proc/$pid/environ" ||
			cr_fail "rank $pid of job $name does not show job $name's environment in /proc/$pid/environ"
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

# The restart's ranks (stasis-restart, no re-execution) once resumed.
cr_restart_bg restart
cr_wait_line restart "resumed from checkpoint"
check_ranks restart
cr_kill restart
cr_pass "ranks named $app with their command line, re-executed and restarted"
