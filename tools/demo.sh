#!/bin/bash
# demo.sh BUILD_DIR: the whole story in one run. A 2-D heat solver (an
# ordinary MPI program) runs uninterrupted, then under stasis-run with a
# checkpoint every second; every process of the job is SIGKILLed after the
# third checkpoint; stasis-restart resumes it, and both final answers are
# printed side by side.
set -euo pipefail
build=$(cd "${1:?usage: demo.sh BUILD_DIR}" && pwd)
app=$build/tests/apps/heat
args=(768 6000)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export STASIS_DIR=$(mktemp -d /tmp/stasis-demo.XXXXXX) STASIS_INTERVAL=1 STASIS_VERBOSE=1
export STASIS_SCHEME=xor STASIS_SET_SIZE=4 STASIS_FAILURE_DOMAIN=1

echo "== uninterrupted run"
# Three checkpoints a second apart must fit in the run: on a machine that
# is quicker than that, run again with more sweeps.
for try in 1 2 3 4; do
	t0=$(date +%s%N)
	reference=$(env -u STASIS_DIR mpirun --oversubscribe -np 4 "$app" "${args[@]}")
	ms=$((($(date +%s%N) - t0) / 1000000))
	((ms >= 6000 || try == 4)) && break
	args[1]=$((args[1] * (9000 + ms - 1) / ms))
	echo "   (done in $ms ms, too soon for three checkpoints: again with ${args[1]} sweeps)"
done
echo "$reference"
launch=(mpirun --oversubscribe -np 4 "$app" "${args[@]}")

echo "== under stasis-run, killed with SIGKILL after checkpoint 3"
STASIS_DEMO_JOB=$STASIS_DIR setsid "$build/tools/stasis-run" "${launch[@]}" >"$STASIS_DIR/run.out" 2>"$STASIS_DIR/run.err" &
job=$!
for _ in $(seq 600); do
	grep -q "checkpoint 3 committed" "$STASIS_DIR/run.err" && break
	if ! kill -0 "$job" 2>/dev/null; then
		cat "$STASIS_DIR/run.err" >&2
		echo "== the job ended before its third checkpoint (files kept in $STASIS_DIR)" >&2
		exit 1
	fi
	sleep 0.1
done
# Open MPI puts each rank in a process group of its own: find every process
# of the job by a variable only it carries, as a node failure would take
# them all.
job_pids() {
	grep -lzx "STASIS_DEMO_JOB=$STASIS_DIR" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | grep -vx "$$" || true
}
# (bash's own "Killed" notice about the job is no news here.)
{
	kill -KILL -- "-$job" || true
	while [[ -n $(job_pids) ]]; do
		kill -KILL $(job_pids) || true
		sleep 0.1
	done
	wait "$job" || true
} 2>/dev/null
grep "^stasis: checkpoint" "$STASIS_DIR/run.err"

echo "== stasis-restart"
resumed=$("$build/tools/stasis-restart" "${launch[@]}" 2> >(grep -E "^stasis: " >&2))
echo "$resumed"

if [[ $resumed == "$reference" ]]; then
	echo "== same answer, bit for bit"
	rm -rf "$STASIS_DIR"
else
	echo "== DIFFERENT answers (checkpoints kept in $STASIS_DIR)"
	exit 1
fi
