#!/bin/bash
# fenix_perf (bench/fenix_perf.c) with partner and xor, to /dev/shm and to
# disk (TMPDIR or /var/tmp). FENIX_PERF_MIB (default 256) per rank,
# FENIX_PERF_NP ranks (default 8), FENIX_PERF_REPS (default 3). Beside
# each, the floor: the same bytes and redundancy written to new files in
# the same directory, nothing else.
set -euo pipefail
B=${1:?build directory}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mib=${FENIX_PERF_MIB:-256} np=${FENIX_PERF_NP:-8} reps=${FENIX_PERF_REPS:-3}
for where in /dev/shm "${TMPDIR:-/var/tmp}"; do
	d=$(mktemp -d "$where/stasis-fenix-perf.XXXXXX")
	chmod 700 "$d"
	for s in partner xor; do
		echo "== $s to $where"
		mpirun --oversubscribe -np "$np" -x STASIS_DIR="$d/%r" -x STASIS_JOB=perf \
			"$B/bench/fenix_perf" "$mib" "$s" "$reps" "$d"
		rm -rf "${d:?}"/*
	done
	rm -rf "$d"
done
