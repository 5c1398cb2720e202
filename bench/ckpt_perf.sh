#!/bin/bash
# ckpt_perf.sh BUILD_DIR: what checkpoints cost the heat solver (4 ranks).
#  1. Blocking time of one checkpoint per rank, full and incremental, against
#     a memcpy and a plain write+fsync of the same bytes to the same
#     directory, measured in the same run (bench/copy_perf).
#  2. Run time with a checkpoint every second versus without, alternating
#     runs (these machines are noisy: ratios, side by side).
set -euo pipefail
build=$(cd "${1:?usage: ckpt_perf.sh BUILD_DIR}" && pwd)
app=$build/tests/apps/heat
args=(${CKPT_PERF_ARGS:-768 10000})
np=4
rounds=${CKPT_PERF_ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export STASIS_DIR=$dir STASIS_VERBOSE=1 STASIS_SCHEME=single STASIS_KEEP=1

plain() { mpirun --oversubscribe -np $np "$app" "${args[@]}" >/dev/null; }
stasis() { "$build/tools/stasis-run" mpirun --oversubscribe -np $np "$app" "${args[@]}" 2>"$dir/err" >/dev/null; }
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
seconds() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); calc "$t1 - $t0"; }

echo "== heat ${args[*]}, $np ranks: run time with STASIS_INTERVAL=1 vs without (alternating)"
printf '%-6s %10s %10s %8s %s\n' round plain_s stasis_s ratio checkpoints
sum=0
for r in $(seq "$rounds"); do
	p=$(seconds plain)
	s=$(STASIS_INTERVAL=1 seconds stasis)
	n=$(grep -c "committed" "$dir/err" || true)
	ratio=$(calc "$s / $p")
	sum=$(calc "$sum + $ratio")
	printf '%-6s %10.2f %10.2f %8.3f %s\n' "$r" "$p" "$s" "$ratio" "$n"
done
printf 'mean ratio stasis/plain: %.3f\n\n' "$(calc "$sum / $rounds")"

echo "== blocking time of one checkpoint per rank vs memcpy and write+fsync of the same bytes"
printf '%-12s %8s %12s %9s %9s %9s %10s %10s\n' dirty kind bytes/rank ckpt_ms memcpy_ms write_ms ckpt/memcpy ckpt/write
for dirty in off uffd mprotect; do
	# A longer run, so that incremental images follow the first full one.
	args=(${CKPT_PERF_ARGS:-768 6000})
	STASIS_DIRTY=$dirty STASIS_INTERVAL=0.5 stasis
	grep "committed" "$dir/err" | sed -n '1p;3p' | while read -r _ _ id _ kind bytes _ ms _; do
		kind=${kind%,}
		per_rank=$((bytes / np))
		ref=$("$build/bench/copy_perf" "$per_rank" "$dir/heat")
		copy=$(awk '/^memcpy_ms/ { print $2 }' <<<"$ref")
		write=$(awk '/^write_ms/ { print $2 }' <<<"$ref")
		printf '%-12s %8s %12d %9s %9.2f %9.2f %10.1f %10.2f\n' "$dirty" "$kind" "$per_rank" "$ms" \
			"$copy" "$write" "$(calc "$ms / $copy")" "$(calc "$ms / $write")"
	done
done
