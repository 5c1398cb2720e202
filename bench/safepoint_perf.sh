#!/bin/bash
# safepoint_perf.sh BUILD_DIR: what stasis adds to every collective on
# MPI_COMM_WORLD when no checkpoint is due (the wrapper, the coordinator's
# flag, counting the collective: mpi/coord.h), plain and under stasis-run in
# alternating rounds, as ratios.
set -euo pipefail
build=$(cd "${1:?usage: safepoint_perf.sh BUILD_DIR}" && pwd)
exe=$build/bench/safepoint_perf
np=${SAFEPOINT_PERF_NP:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export STASIS_DIR=$dir STASIS_SCHEME=single STASIS_INTERVAL=86400

field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }

echo "== $np ranks, us per call on MPI_COMM_WORLD (no checkpoint due)"
printf '%-6s %12s %12s %8s %12s %12s %8s\n' round allred_plain allred_stasis ratio \
	barrier_plain barrier_stasis ratio
for r in 1 2 3; do
	p=$(mpirun --oversubscribe -np "$np" "$exe" 20000)
	s=$("$build/tools/stasis-run" mpirun --oversubscribe -np "$np" "$exe" 20000)
	ap=$(field allreduce_us "$p") as=$(field allreduce_us "$s")
	bp=$(field barrier_us "$p") bs=$(field barrier_us "$s")
	printf '%-6s %12s %12s %8s %12s %12s %8s\n' "$r" "$ap" "$as" "$(calc "$as / $ap")" \
		"$bp" "$bs" "$(calc "$bs / $bp")"
done
