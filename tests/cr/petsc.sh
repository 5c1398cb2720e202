#!/bin/bash
# petsc.sh: a PETSc program (tests/apps/petsc_steps.py, Debian's
# python3-petsc4py over Open MPI), killed after 2 checkpoints and
# restarted: its output must be the uninterrupted run's. petsc4py loads
# PETSc's whole dependency tree by dlopen() after MPI_Init (placed where a
# restart can put it back: process/closure.c), and PetscInitialize adds
# MPI error classes and codes of its own, made again at the restart with
# the same numbers (mpi/errclasses.c). Every checkpoint attempt must be
# committed: none failed, none skipped.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

python=/usr/bin/python3
CR_NP=2
# Debian's petsc4py is found through PETSC_DIR (its petsc4py.pth).
export PETSC_DIR=${PETSC_DIR:-/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real}
"$python" -c 'import petsc4py.PETSc' 2>/dev/null ||
	cr_skip "$python cannot import petsc4py (Debian's python3-petsc4py, PETSC_DIR=$PETSC_DIR)"
unset MPI4PY_RC_THREAD_LEVEL
export OMP_NUM_THREADS=1
cr_setup
cr_app "$python" "$(dirname "$(readlink -f "$0")")/../apps/petsc_steps.py" 8
cr_reference

cr_kill_restart_same 2
if line=$(grep -h -m 1 -E 'checkpoint [0-9]+ failed|checkpoint skipped|cannot restore yet' "$CR_TMP"/*.err); then
	cr_fail "a checkpoint was refused or failed: $line"
fi
cr_ok "every checkpoint attempt was committed"
cr_pass "PETSc (petsc4py): killed after 2 checkpoints, restarted from $CR_NEWEST, same output"
