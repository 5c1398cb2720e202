#!/bin/bash
# python.sh [openblas]: a real Python program, Debian's /usr/bin/python3
# with its python3-numpy and python3-mpi4py (tests/apps/numpy_mpi.py), at
# mpi4py's default thread level (MPI_THREAD_MULTIPLE, one thread of its
# own), killed after two checkpoints and restarted: its output must be the
# uninterrupted run's. CPython keeps its thread state under a pthread key,
# numpy and mpi4py are extension modules loaded with dlopen() (numpy's
# with thread-local storage of its own), json and decimal are loaded after
# MPI_Init.
#
# With openblas, numpy's BLAS is Debian's OpenBLAS (libopenblas0-pthread,
# from CR_OPENBLAS_DIR, default its directory under /usr/lib), whose
# library makes a pool of threads when numpy is imported, before MPI_Init;
# OPENBLAS_NUM_THREADS is not set, so the pool must be stopped and made
# again with the rest. Debian's numpy defaults to the reference BLAS,
# which has no threads (plain python.sh).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

python=/usr/bin/python3
CR_NP=2
"$python" -c 'import numpy, mpi4py' 2>/dev/null ||
	cr_skip "$python cannot import numpy and mpi4py (Debian's python3-numpy, python3-mpi4py)"
unset MPI4PY_RC_THREAD_LEVEL OPENBLAS_NUM_THREADS OMP_NUM_THREADS
if [[ ${1:-} == openblas ]]; then
	dir=${CR_OPENBLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}
	[[ -r $dir/libblas.so.3 ]] || cr_skip "no OpenBLAS in $dir (Debian's libopenblas0-pthread)"
	export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	# OpenBLAS makes a thread per CPU a rank may run on: Open MPI would
	# bind each rank to one core, and OpenBLAS would make none.
	export OMPI_MCA_hwloc_base_binding_policy=none
	threads=$("$python" -c 'import numpy; print(open("/proc/self/status").read().split("Threads:")[1].split()[0])')
	((threads > 1)) || cr_skip "OpenBLAS makes no threads here (one CPU?)"
	cr_say "numpy's BLAS is OpenBLAS from $dir: $threads threads in python3 after importing numpy"
fi
cr_setup
# threads.c says at this level how many threads it stopped.
[[ ${1:-} == openblas ]] && export STASIS_VERBOSE=2
cr_app "$python" "$(dirname "$(readlink -f "$0")")/../apps/numpy_mpi.py" 600 128
cr_reference

cr_kill_restart_same 2
newest=$CR_NEWEST
if [[ ${1:-} == openblas ]]; then
	cr_expect_line run 'threads: [1-9][0-9]* application threads stopped' \
		"OpenBLAS's threads were stopped for the checkpoints"
fi
cr_pass "python3 with numpy and mpi4py: killed after 2 checkpoints, restarted from $newest, same output"
