#!/bin/bash
# agree_perf.sh BUILD_DIR: how long after a checkpoint is wanted the ranks
# stop and the checkpoint is done, for programs that reach a collective on
# every rank often (heat: MPI_COMM_WORLD each step; halves: collectives on two
# halves only), programs that never call one in their main loop (ring:
# pre-posted receives; master: workers blocked in MPI_Recv), BLACS's way of
# waiting (blacs: receives from MPI_ANY_SOURCE between broadcasts on rows and
# columns) and pw.x's (fftsplit: back-to-back MPI_Alltoall on split
# communicators), the last also at AGREE_PERF_WIDE ranks (default 32).
# Each program runs under stasis-run with a short interval until CHECKPOINTS
# checkpoints are committed; stasis prints at STASIS_VERBOSE=2, per
# checkpoint, the time from the request to every rank stopped ("to all
# stopped", over the attempts abandoned on the way), the time of the
# attempt that concluded, its rounds and releases, and the commit time.
# Medians and worsts per program, beside the plain program's time per step
# (fftsplit, blacs: printed by the program; the others: -).
set -euo pipefail
build=$(cd "${1:?usage: agree_perf.sh BUILD_DIR}" && pwd)
apps=$build/tests/apps
np=${AGREE_PERF_NP:-4}
wide=${AGREE_PERF_WIDE:-32}
ckpts=${AGREE_PERF_CHECKPOINTS:-8}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
pid=
trap '[[ -n $pid ]] && kill -9 -- -"$pid" 2>/dev/null; rm -rf "$dir"' EXIT
export STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=1 STASIS_INTERVAL=0.5 STASIS_VERBOSE=2

median() { sort -g | awk '{ v[NR] = $1 } END { print NR ? ((NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) : "-" }'; }
worst() { sort -g | tail -1 | grep . || echo -; }
field() { sed -nE "s/.*$1.*/\\1/p" "$2"; }

# One program at N ranks (its arguments long enough for CHECKPOINTS
# checkpoints).
one() {
	local name=$1 n=$2 log=$dir/$1-$2.err step=-
	shift 2
	export STASIS_DIR=$dir/ckpt-$name-$n/node%n STASIS_SET_SIZE=$((n < 8 ? n : 8))
	# The plain program's time per step, where it prints one.
	if [[ $name == fftsplit* || $name == blacs ]]; then
		step=$(mpirun --oversubscribe -np "$n" "${@:1:$#-1}" 300 2>&1 >/dev/null | sed -nE 's/.*step_us ([0-9.]+).*/\1/p')
		step=$(awk -v u="${step:-0}" 'BEGIN { printf "%.3f", u / 1000 }')
	fi
	setsid "$build/tools/stasis-run" mpirun --oversubscribe -np "$n" "$@" >/dev/null 2>"$log" &
	pid=$!
	while (($(grep -c 'committed' "$log") < ckpts)); do
		sleep 0.1
		kill -0 "$pid" 2>/dev/null || break
	done
	kill -9 -- -"$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
	(($(grep -c 'committed' "$log") > 0)) || { cat "$log" >&2; exit 1; }
	printf '%-9s %4s %6s %9s %9s %9s %7s %8s %9s %9s %9s\n' "$name" "$n" "$(grep -c 'committed' "$log")" \
		"$(field 'from the request ([0-9]+) ms to all stopped' "$log" | median)" \
		"$(field 'from the request ([0-9]+) ms to all stopped' "$log" | worst)" \
		"$(field 'ranks agreed in ([0-9]+) ms' "$log" | median)" \
		"$(field '\(([0-9]+) rounds\)' "$log" | median)" \
		"$(grep -c 'abandoned after' "$log" || true)" \
		"$(field 'checkpoint done ([0-9]+) ms' "$log" | median)" \
		"$(field 'committed: [a-z]+, [0-9]+ bytes, ([0-9.]+) ms' "$log" | median)" "$step"
}

echo "== STASIS_INTERVAL=0.5, over $ckpts checkpoints; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   stop_*: from the request to every rank stopped (median, worst); agreed: the attempt that concluded"
printf '%-9s %4s %6s %9s %9s %9s %7s %8s %9s %9s %9s\n' program np ckpts stop_med stop_max agreed_ms rounds abandon done_ms commit_ms step_ms
one heat "$np" "$apps/heat" 512 100000000
one halves "$np" "$apps/halves" 4096 100000000
one ring "$np" "$apps/ring" 4096 100000000
one master "$np" "$apps/master" 2000 100000000
one blacs "$np" "$apps/blacs" 1024 "${AGREE_PERF_BLACS_ITERS:-40000}"
one fftsplit "$np" "$apps/fftsplit" 4096 "${AGREE_PERF_FFT_ITERS:-20000}"
one fftsplit "$wide" "$apps/fftsplit" 4096 "${AGREE_PERF_FFT_WIDE_ITERS:-3000}"
