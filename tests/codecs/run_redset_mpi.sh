#!/bin/sh
# Runs test_redset_mpi under mpirun: 8 ranks, four simulated nodes of two.
# Usage: run_redset_mpi.sh path/to/test_redset_mpi [scratch dir]
# Exit status is the test's (0 pass, 1 fail, 77 skip).
bin=${1:?usage: $0 test_redset_mpi [dir]}
shift
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Oversubscribed ranks must yield instead of spinning, or 8 ranks on 2 cores
# crawl.
exec "$mpirun" -np 8 --oversubscribe --mca mpi_yield_when_idle 1 "$bin" "$@"
