#!/bin/bash
# replay_perf.sh BUILD_DIR: how long a restart takes to make the program's MPI
# objects again, for a program holding 1,000 communicators and 10,000
# datatypes, beside the same program holding none, in the same run. Each
# round: run under stasis-run until a checkpoint is committed, SIGKILL,
# restart; stasis prints the replay time ("replayed N MPI objects in X ms")
# and the time to "resumed" is taken from the launch.
set -euo pipefail
build=$(cd "${1:?usage: replay_perf.sh BUILD_DIR}" && pwd)
exe=$build/bench/objects_many
np=${REPLAY_PERF_NP:-2}
rounds=${REPLAY_PERF_ROUNDS:-3}
comms=${REPLAY_PERF_COMMS:-1000}
types=${REPLAY_PERF_TYPES:-10000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'pkill -9 -f "$exe" 2>/dev/null || true; rm -rf "$dir"' EXIT
export STASIS_SCHEME=single STASIS_INTERVAL=1 STASIS_VERBOSE=1 TMPDIR=$dir

now_ms() { date +%s%3N; }

# One round for COMMS TYPES: prints "objects replay_ms resume_ms".
round() {
	local c=$1 t=$2 log=$dir/run.err pid start line
	export STASIS_DIR=$dir/ckpt-$c-$t
	rm -rf "$STASIS_DIR"
	setsid "$build/tools/stasis-run" mpirun --oversubscribe -np "$np" "$exe" "$c" "$t" 100000000 \
		>/dev/null 2>"$log" &
	pid=$!
	until grep -q 'committed' "$log"; do
		sleep 0.1
		kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
	done
	kill -9 -- -"$pid" 2>/dev/null || true
	pkill -9 -f "$exe" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	start=$(now_ms)
	setsid "$build/tools/stasis-restart" mpirun --oversubscribe -np "$np" "$exe" "$c" "$t" \
		100000000 >/dev/null 2>"$log" &
	pid=$!
	until grep -q 'resumed from' "$log"; do
		sleep 0.02
		kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
	done
	local resumed=$(($(now_ms) - start))
	kill -9 -- -"$pid" 2>/dev/null || true
	pkill -9 -f "$exe" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	line=$(grep -m 1 'replayed' "$log")
	awk -v r="$resumed" '{ print $3, $(NF - 1), r }' <<<"$line"
}

echo "== $np ranks; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-28s %9s %10s %12s\n' round program objects replay_ms to_resumed_ms
for ((r = 1; r <= rounds; r++)); do
	read -r o0 m0 t0 <<<"$(round 0 0)"
	read -r o1 m1 t1 <<<"$(round "$comms" "$types")"
	printf '%-6s %-28s %9s %10s %12s\n' "$r" "no objects" "$o0" "$m0" "$t0"
	printf '%-6s %-28s %9s %10s %12s\n' "$r" "$comms comms, $types types" "$o1" "$m1" "$t1"
done
