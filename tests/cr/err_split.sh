#!/bin/bash
# err_split.sh: a communicator made by MPI_Comm_split_type groups ranks by
# where they run. A restart makes it again with the same members, and must
# stop, in one line naming it, when those members no longer share what it
# split by; nothing on disk may change. The program splits by core
# (OMPI_COMM_TYPE_CORE): run bound to cores, two ranks share each core;
# restarted unbound, no two do. Restarted bound again, it resumes.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

bound="mpirun --bind-to core:overload-allowed"
cr_setup
# shellcheck disable=SC2046 # the default arguments are words
cr_app objects $(cr_default_args objects) --core
CR_LAUNCHER=$bound
cr_reference
cr_prepare_checkpoints 1
before=$CR_TMP/before
cr_snapshot "$before"

CR_LAUNCHER=mpirun
cr_restart unbound
cr_expect_failure unbound
cr_expect_words unbound "the restart names the split" '^stasis' 'MPI_Comm_split_type' 'no longer share'
cr_expect_unchanged "$before"

CR_LAUNCHER=$bound
cr_restart bound
cr_expect_status bound 0
cr_expect_line bound "resumed from checkpoint $CR_NEWEST\\b" "restarted as placed before, it resumes"
cr_expect_same bound
cr_pass "a split by core refused when the ranks are placed otherwise, resumed when placed the same"
