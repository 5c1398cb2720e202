#!/bin/bash
# feature.sh thread|multiple|split|type: heat with an MPI feature stasis does
# not (yet) checkpoint safely must still run to completion under stasis-run
# with the uninterrupted output, and stasis must warn about the feature in
# a line of its own (thread, MPI_THREAD_MULTIPLE, MPI_Comm_split, MPI_Type).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

feature=${1:?usage: feature.sh thread|multiple|split|type}
case $feature in
thread) flag=--thread re='thread' ;;
multiple) flag=--multiple re='MPI_THREAD_MULTIPLE' ;;
split) flag=--split re='MPI_Comm_split' ;;
type) flag=--type re='MPI_Type' ;;
*)
	echo "unknown feature $feature" >&2
	exit 1
	;;
esac

cr_setup
# shellcheck disable=SC2046 # the default arguments are words
cr_app heat $(cr_default_args heat) "$flag"
cr_reference
cr_run_wait run
cr_expect_status run 0
cr_expect_same run
cr_expect_words run "stasis warns about $flag" '^stasis' "$re"
cr_say "checkpoints committed during the run: $(cr_commits run)"
cr_pass "heat $flag under stasis-run: same output, warning given"
