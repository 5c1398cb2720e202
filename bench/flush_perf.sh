#!/bin/bash
# flush_perf.sh BUILD_DIR: what the flush level (STASIS_FLUSH_DIR) costs the
# heat solver (4 ranks, a checkpoint every second, STASIS_KEEP=1): run time
# and mean blocking time of a checkpoint with a flush of every checkpoint
# versus without, alternating runs, side by side. The copy runs on a
# thread of stasis's, so the blocking time should not grow with it; the
# run time may, by the CPU and I/O the copy takes from the ranks (here the
# "shared file system" is a directory on the same disk).
set -euo pipefail
build=$(cd "${1:?usage: flush_perf.sh BUILD_DIR}" && pwd)
app=$build/tests/apps/heat
args=(${FLUSH_PERF_ARGS:-768 10000})
np=4
rounds=${FLUSH_PERF_ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export STASIS_VERBOSE=1 STASIS_SCHEME=single STASIS_KEEP=1 STASIS_INTERVAL=1

calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
# run FLUSH(0|1): seconds of one run; its stderr in $dir/err
run() {
	local t0 t1
	rm -rf "$dir/local" "$dir/shared"
	t0=$(date +%s.%N)
	if (($1)); then
		STASIS_DIR=$dir/local STASIS_FLUSH_DIR=$dir/shared "$build/tools/stasis-run" \
			mpirun --oversubscribe -np $np "$app" "${args[@]}" 2>"$dir/err" >/dev/null
	else
		STASIS_DIR=$dir/local "$build/tools/stasis-run" \
			mpirun --oversubscribe -np $np "$app" "${args[@]}" 2>"$dir/err" >/dev/null
	fi
	t1=$(date +%s.%N)
	calc "$t1 - $t0"
}
# mean blocking ms of the checkpoints of the last run
blocking() { awk '/committed:/ { s += $(NF - 1); n++ } END { printf "%.1f", n ? s / n : 0 }' "$dir/err"; }

echo "== heat ${args[*]}, $np ranks, a checkpoint every second: flush of every checkpoint vs none (alternating)"
printf '%-6s %9s %9s %8s %12s %12s %8s\n' round none_s flush_s ratio none_ms/ckpt flush_ms/ckpt flushed
sum=0
for r in $(seq "$rounds"); do
	a=$(run 0)
	ams=$(blocking)
	b=$(run 1)
	bms=$(blocking)
	flushed=$(grep -c "is flushed to" "$dir/err" || true)
	ratio=$(calc "$b / $a")
	sum=$(calc "$sum + $ratio")
	printf '%-6s %9.2f %9.2f %8.3f %12s %12s %8s\n' "$r" "$a" "$b" "$ratio" "$ams" "$bms" "$flushed"
done
printf 'mean run time ratio flush/none: %.3f\n' "$(calc "$sum / $rounds")"
