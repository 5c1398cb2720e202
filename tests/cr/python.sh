#!/bin/bash
# python.sh: a real Python program, Debian's /usr/bin/python3 with its
# python3-numpy and python3-mpi4py (tests/apps/numpy_mpi.py), at
# mpi4py's default thread level (MPI_THREAD_MULTIPLE, one thread), killed
# after two checkpoints and restarted: its output must be the uninterrupted
# run's. CPython keeps its thread state under a pthread key, numpy and
# mpi4py are extension modules loaded with dlopen() (numpy's with
# thread-local storage of its own), json and decimal are loaded after
# MPI_Init.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

python=/usr/bin/python3
CR_NP=2
"$python" -c 'import numpy, mpi4py' 2>/dev/null ||
	cr_skip "$python cannot import numpy and mpi4py (Debian's python3-numpy, python3-mpi4py)"
unset MPI4PY_RC_THREAD_LEVEL
cr_setup
cr_app "$python" "$(dirname "$(readlink -f "$0")")/../apps/numpy_mpi.py" 600 128
cr_reference

cr_run run
cr_wait_commits run 2
cr_kill run
newest=$(cr_newest_complete)
[[ -n $newest ]] || cr_fail "no complete checkpoint on disk after two commits"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from the newest complete checkpoint ($newest)"
cr_expect_same restart
cr_pass "python3 with numpy and mpi4py: killed after 2 checkpoints, restarted from $newest, same output"
