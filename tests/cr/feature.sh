#!/bin/bash
# feature.sh thread|mpi-thread|refused: heat using something stasis cannot
# restore must still run to completion under stasis-run with the
# uninterrupted output, and stasis must warn about it in a line of its own
# naming it:
#   thread      a pthread of the program's on a stack the program allocated
#               itself (refused where it is made; threads on stacks of
#               their own are restored)
#   mpi-thread  an MPI_THREAD_MULTIPLE program whose second thread calls MPI
#               while the main thread computes (refused at the call)
#   refused     a call stasis refuses (MPI_Open_port: a port other jobs may
#               connect to), right after MPI_Init, so
#               no checkpoint may be taken at all. (A function the table of
#               MPI calls does not classify is refused the same way; every
#               function of Open MPI's mpi.h is classified now.)
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

feature=${1:?usage: feature.sh thread|mpi-thread|refused}
case $feature in
thread) flag='--thread --own-stack' re='stack of the program' ;;
mpi-thread) flag='--multiple --mpi-thread' re='MPI called from a thread' ;;
refused) flag=--refused re='MPI_Open_port' ;;
*)
	echo "unknown feature $feature" >&2
	exit 1
	;;
esac

cr_setup
# shellcheck disable=SC2046,SC2086 # the default arguments and flags are words
cr_app heat $(cr_default_args heat) $flag
cr_reference
cr_run_wait run
cr_expect_status run 0
cr_expect_same run
cr_expect_words run "stasis warns about $flag" '^stasis' "$re"
commits=$(cr_commits run)
cr_say "checkpoints committed during the run: $commits"
if [[ $feature == refused ]] && ((commits > 0)); then
	cr_show run
	cr_fail "$commits checkpoints were taken past an MPI call stasis refuses"
fi
cr_pass "heat $flag under stasis-run: same output, warning given"
