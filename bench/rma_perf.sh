#!/bin/bash
# rma_perf.sh BUILD_DIR: what stasis adds to one-sided calls (mpi/windows.h):
# translating the window's virtual handle and the epoch bookkeeping of the
# wrappers. Each round runs bench/rma_perf plain and under stasis-run back
# to back (no checkpoint due); per case it prints both latencies, their
# ratio and the difference in microseconds, then the median difference
# over the rounds. A case is one RMA call plus the MPI_Win_flush (or
# fence) that completes it: two wrapped calls. RMA_PERF_FLAVOR=--create:
# windows made by MPI_Win_create in both runs (the wrappers' cost alone);
# default MPI_Win_allocate, which stasis makes with MPI_Win_create over
# arena memory (Open MPI's shared-memory component osc/sm is then not used).
set -euo pipefail
build=$(cd "${1:?usage: rma_perf.sh BUILD_DIR}" && pwd)
exe=$build/bench/rma_perf
np=${RMA_PERF_NP:-2}
rounds=${RMA_PERF_ROUNDS:-5}
n=${RMA_PERF_N:-20000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export STASIS_DIR=$dir STASIS_SCHEME=single STASIS_INTERVAL=86400

flavor=()
[[ -n ${RMA_PERF_FLAVOR:-} ]] && flavor=("$RMA_PERF_FLAVOR")
cases=(put_flush get_flush acc_flush fop_flush put_fence)
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }

echo "== $np ranks, $n calls per case, us per call; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-12s %10s %10s %7s %9s\n' round case plain stasis ratio added_us
declare -A added
for ((r = 1; r <= rounds; r++)); do
	p=$(mpirun --oversubscribe -np "$np" "$exe" "$n" "${flavor[@]}")
	s=$("$build/tools/stasis-run" mpirun --oversubscribe -np "$np" "$exe" "$n" "${flavor[@]}")
	for c in "${cases[@]}"; do
		a=$(field "$c" "$p") b=$(field "$c" "$s")
		d=$(calc "$b - $a")
		added[$c]+="$d "
		printf '%-6s %-12s %10s %10s %7s %9s\n' "$r" "$c" "$a" "$b" "$(calc "$b / $a")" "$d"
	done
done
echo "== median added latency per case (us; two wrapped calls each), target <= 0.2 per call"
for c in "${cases[@]}"; do
	printf '%-12s %9s\n' "$c" "$(tr ' ' '\n' <<<"${added[$c]}" | grep . | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
done
