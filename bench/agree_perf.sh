#!/bin/bash
# agree_perf.sh BUILD_DIR: how long after a checkpoint is wanted the ranks
# stop and the checkpoint is done, for programs that reach a collective on
# every rank often (heat: MPI_COMM_WORLD each step; halves: collectives on two
# halves only) and programs that never call one in their main loop (ring:
# pre-posted receives; master: workers blocked in MPI_Recv), in the same run.
# Each program runs under stasis-run with a short interval until CHECKPOINTS
# checkpoints are committed; stasis prints at STASIS_VERBOSE=2, per
# checkpoint, the time from the request to every rank stopped ("agreed in")
# and to every rank done, and the commit time. Medians per program; "rounds"
# are the leader's rounds of queries.
set -euo pipefail
build=$(cd "${1:?usage: agree_perf.sh BUILD_DIR}" && pwd)
apps=$build/tests/apps
np=${AGREE_PERF_NP:-4}
ckpts=${AGREE_PERF_CHECKPOINTS:-8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'pkill -9 -f "$apps/" 2>/dev/null || true; rm -rf "$dir"' EXIT
# Each rank a node of its own, with its own directory, as on a cluster.
export STASIS_SCHEME=xor STASIS_SET_SIZE=$np STASIS_FAILURE_DOMAIN=1 STASIS_INTERVAL=0.5 STASIS_VERBOSE=2

median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? ((NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) : "-" }'; }

# One program (its arguments long enough for CHECKPOINTS checkpoints).
one() {
	local name=$1 log=$dir/$1.err pid
	shift
	export STASIS_DIR=$dir/ckpt-$name/node%n
	setsid "$build/tools/stasis-run" mpirun --oversubscribe -np "$np" "$@" >/dev/null 2>"$log" &
	pid=$!
	while (($(grep -c 'committed' "$log") < ckpts)); do
		sleep 0.1
		kill -0 "$pid" 2>/dev/null || break
	done
	kill -9 -- -"$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	(($(grep -c 'committed' "$log") > 0)) || { cat "$log" >&2; exit 1; }
	printf '%-8s %6s %10s %8s %10s %10s\n' "$name" "$(grep -c 'committed' "$log")" \
		"$(awk '/ranks agreed in/ { print $(NF - 10) }' "$log" | median)" \
		"$(awk '/ranks agreed in/ { gsub(/\(/, "", $(NF - 8)); print $(NF - 8) }' "$log" | median)" \
		"$(awk '/ranks agreed in/ { print $(NF - 4) }' "$log" | median)" \
		"$(awk '/committed:/ { print $(NF - 1) }' "$log" | median)"
}

echo "== $np ranks, STASIS_INTERVAL=0.5, median over $ckpts checkpoints; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %6s %10s %8s %10s %10s\n' program ckpts agreed_ms rounds done_ms commit_ms
one heat "$apps/heat" 512 100000000
one halves "$apps/halves" 4096 100000000
one ring "$apps/ring" 4096 100000000
one master "$apps/master" 2000 100000000
