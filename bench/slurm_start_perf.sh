#!/bin/bash
# slurm_start_perf.sh BUILD_DIR: how much longer a Slurm job step takes to
# start (and end) under stasis than without: a tiny MPI job (heat 64 1:
# MPI_Init, one sweep, MPI_Finalize) through srun --mpi=pmix, plain and
# under stasis-run, rounds alternating, on the one-node cluster of the tests
# (tests/lib/slurm-ci.sh, started and stopped here; needs root and the
# slurm-wlm and munge packages). Prints both side by side, median seconds.
# Env: SLURM_PERF_NP (2), SLURM_PERF_ROUNDS (5).
set -euo pipefail
build=$(cd "${1:?usage: slurm_start_perf.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
np=${SLURM_PERF_NP:-2}
rounds=${SLURM_PERF_ROUNDS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stasis-slurm-perf.XXXXXX")
trap 'bash "$src/tests/lib/slurm-ci.sh" down "$tmp/slurm"; rm -rf "$tmp"' EXIT
bash "$src/tests/lib/slurm-ci.sh" up "$tmp/slurm" >/dev/null
export SLURM_CONF=$tmp/slurm/slurm.conf STASIS_DIR=$tmp/ckpt STASIS_SCHEME=single
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
run=(srun -n "$np" --overcommit --mpi=pmix "$build/tests/apps/heat" 64 1)
"${run[@]}" >/dev/null # the first PMIx step loads hwloc's topology: not counted

# time_ms CMD...: wall milliseconds of CMD.
time_ms() {
	local t0
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1
	echo $((($(date +%s%N) - t0) / 1000000))
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

plain=() stasis=()
for ((i = 0; i < rounds; i++)); do
	plain+=("$(time_ms "${run[@]}")")
	stasis+=("$(time_ms "$build/tools/stasis-run" "${run[@]}")")
done
p=$(printf '%s\n' "${plain[@]}" | median)
s=$(printf '%s\n' "${stasis[@]}" | median)
printf '%-28s %10s %10s %10s\n' "srun step, $np ranks" plain stasis extra
printf '%-28s %9.3fs %9.3fs %9.3fs\n' "median of $rounds" "$(bc -l <<<"$p/1000")" \
	"$(bc -l <<<"$s/1000")" "$(bc -l <<<"($s-$p)/1000")"
printf 'rounds (ms): plain %s; stasis %s\n' "${plain[*]}" "${stasis[*]}"
