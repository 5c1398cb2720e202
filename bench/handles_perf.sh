#!/bin/bash
# handles_perf.sh BUILD_DIR: what stasis adds to MPI calls on objects the
# program made: translating virtual handles, accounting for requests and
# messages, counting collectives (mpi/collective_counts.h) and running
# blocking calls as non-blocking ones (mpi/blocking.h). Each round runs
# bench/handles_perf plain and under stasis-run back to back (no checkpoint
# due); per case it prints both latencies, their ratio and the difference
# in microseconds, then the median difference over the rounds.
set -euo pipefail
build=$(cd "${1:?usage: handles_perf.sh BUILD_DIR}" && pwd)
exe=$build/bench/handles_perf
np=${HANDLES_PERF_NP:-2}
rounds=${HANDLES_PERF_ROUNDS:-5}
n=${HANDLES_PERF_N:-50000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export STASIS_DIR=$dir STASIS_SCHEME=single STASIS_INTERVAL=86400

cases=(allreduce_dup allreduce_split pingpong pingpong_req vector_pingpong pingpong_4mib type_cycle)
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }

echo "== $np ranks, $n calls per case, us per call; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-16s %10s %10s %7s %9s\n' round case plain stasis ratio added_us
declare -A added
for ((r = 1; r <= rounds; r++)); do
	p=$(mpirun --oversubscribe -np "$np" "$exe" "$n")
	s=$("$build/tools/stasis-run" mpirun --oversubscribe -np "$np" "$exe" "$n")
	for c in "${cases[@]}"; do
		a=$(field "$c" "$p") b=$(field "$c" "$s")
		d=$(calc "$b - $a")
		added[$c]+="$d "
		printf '%-6s %-16s %10s %10s %7s %9s\n' "$r" "$c" "$a" "$b" "$(calc "$b / $a")" "$d"
	done
done
echo "== median added latency per call (us), target <= 0.2 (pingpong_4mib: within 5%)"
for c in "${cases[@]}"; do
	printf '%-16s %9s\n' "$c" "$(tr ' ' '\n' <<<"${added[$c]}" | grep . | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
done
