#!/bin/bash
# dlopen_deep.sh: a Python program under mpi4py (tests/apps/llvm_steps.py)
# loads, after MPI_Init, a library whose dependency closure is far larger
# than the default hole for one dlopen(): libclang-cpp.so.14 with libLLVM-14
# and the rest (process/closure.c sizes the hole for all of them). Killed
# after 2 checkpoints and restarted: the whole closure is placed again where
# the checkpoint had it, and the output equals an uninterrupted run's; no
# library was refused.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

python=/usr/bin/python3
CR_NP=2
"$python" -c 'import mpi4py' 2>/dev/null ||
	cr_skip "$python cannot import mpi4py (Debian's python3-mpi4py)"
"$python" -c 'import ctypes; ctypes.CDLL("libclang-cpp.so.14")' 2>/dev/null ||
	cr_skip "no libclang-cpp.so.14 (Debian's libclang-cpp14, with clang-14)"
unset MPI4PY_RC_THREAD_LEVEL
cr_setup
cr_app "$python" "$(dirname "$(readlink -f "$0")")/../apps/llvm_steps.py" 600
cr_reference

cr_kill_restart_same 2
if grep -q 'library loaded with dlopen()' "$CR_TMP"/*.out "$CR_TMP"/*.err 2>/dev/null; then
	cr_fail "a library loaded with dlopen() was refused: $(grep -h 'library loaded with dlopen()' "$CR_TMP"/*.out "$CR_TMP"/*.err | head -n 1)"
fi
cr_ok "no library loaded with dlopen() was refused"
cr_pass "python3 with libclang-cpp/libLLVM loaded by ctypes: killed after 2 checkpoints, restarted from $CR_NEWEST, same output"
