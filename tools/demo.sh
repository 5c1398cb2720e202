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
launch=(mpirun --oversubscribe -np 4 "$app" "${args[@]}")

echo "== uninterrupted run"
reference=$(env -u STASIS_DIR mpirun --oversubscribe -np 4 "$app" "${args[@]}")
echo "$reference"

echo "== under stasis-run, killed with SIGKILL after checkpoint 3"
STASIS_DEMO_JOB=$STASIS_DIR setsid "$build/tools/stasis-run" "${launch[@]}" >"$STASIS_DIR/run.out" 2>"$STASIS_DIR/run.err" &
job=$!
for _ in $(seq 600); do
	grep -q "checkpoint 3 committed" "$STASIS_DIR/run.err" && break
	sleep 0.1
done
# Open MPI puts each rank in a process group of its own: find every process
# of the job by a variable only it carries, as a node failure would take
# them all.
job_pids() {
	grep -lzx "STASIS_DEMO_JOB=$STASIS_DIR" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | grep -vx "$$" || true
}
kill -KILL -- "-$job" 2>/dev/null || true
while [[ -n $(job_pids) ]]; do
	kill -KILL $(job_pids) 2>/dev/null || true
	sleep 0.1
done
wait "$job" 2>/dev/null || true
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
