# shellcheck shell=bash
# slurm.sh: a one-node Slurm cluster for the tests under Slurm
# (tests/cr/slurm.sh). Source it after cr.sh; slurm_setup after cr_setup
# starts munged (unless one runs), slurmctld and slurmd from Debian's
# packages as plain processes (slurm-ci.sh: no systemd, no cgroups), in
# $CR_TMP/slurm, and the test's exit trap stops them. Up in about a second.
# Skips (77) without the packages or without root (the daemons run as root
# so that their directories need no user of their own).

SLURM_CI=$(dirname "${BASH_SOURCE[0]}")/slurm-ci.sh

# slurm_setup [NODES]: NODES > 1 starts that many nodes (slurmds) on this
# host, n0..n<NODES-1> (slurm-ci.sh).
slurm_setup() {
	local p nodes=${1:-1}
	for p in srun sbatch squeue scontrol scancel sinfo /usr/sbin/slurmctld /usr/sbin/slurmd \
		/usr/sbin/munged; do
		command -v "$p" >/dev/null || cr_skip "$p not found (packages slurm-wlm, munge: .ci/deps)"
	done
	((EUID == 0)) || cr_skip "the one-node Slurm cluster of the tests starts its daemons as root"
	# The daemons listen on fixed ports: one cluster at a time.
	if [[ -n $(sinfo -h -o %T 2>/dev/null) ]]; then
		cr_skip "a Slurm cluster already answers here (SLURM_CONF=${SLURM_CONF:-default})"
	fi
	SLURM_DIR=$CR_TMP/slurm
	CR_AT_EXIT+=("bash '$SLURM_CI' down '$SLURM_DIR'")
	bash "$SLURM_CI" up "$SLURM_DIR" "$nodes" >/dev/null || cr_fail "cannot start the $nodes-node Slurm cluster"
	export SLURM_CONF=$SLURM_DIR/slurm.conf
	cr_ok "$nodes-node Slurm cluster up ($(sinfo -h -o '%N %c CPUs %T'))"
	# Ranks yield when idle, as under mpirun --oversubscribe (the other
	# tests): busy-polling ranks on a loaded two-core machine took minutes.
	export OMPI_MCA_mpi_yield_when_idle=1
	# Every run goes through srun with PMIx (cr_reference and cr_run use it).
	cr_mpirun() {
		echo srun -J "$(basename "$CR_APP")" -n "$CR_NP" --overcommit --mpi=pmix --kill-on-bad-exit=1
	}
}

# slurm_node_pids NODE: every process of node NODE of a cluster of several
# (slurm_setup NODES): its slurmd and slurmstepds (SLURM_CI_NODE) and the
# tasks they started (SLURMD_NODENAME).
slurm_node_pids() {
	{ grep -lzxE "SLURM_CI_NODE=$1|SLURMD_NODENAME=$1" /proc/[0-9]*/environ 2>/dev/null || true; } |
		cut -d/ -f3
}

# slurm_job_id FILE: the id in sbatch's "Submitted batch job N" line.
slurm_job_id() {
	sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$1"
}

# slurm_wait_gone ID [TIMEOUT]: wait until Slurm no longer lists the job.
slurm_wait_gone() {
	local id=$1 deadline=$((SECONDS + ${2:-$CR_TIMEOUT}))
	while [[ -n $(squeue -h -j "$id" -o %i 2>/dev/null) ]]; do
		((SECONDS < deadline)) || cr_fail "Slurm job $id still listed after ${2:-$CR_TIMEOUT}s"
		sleep 0.5
	done
}

# slurm_submitted NAME: wait for the sbatch started as job NAME (cr_start)
# to return, and reap it. Not cr_wait_exit: the batch job's processes carry
# NAME's CR_JOB mark (sbatch exports the environment; slurm_ranks finds the
# ranks by it) and may already run when sbatch returns, which is no process
# left behind; the job's own end is checked through Slurm.
slurm_submitted() {
	local name=$1 deadline=$((SECONDS + CR_TIMEOUT))
	while cr_alive "$name"; do
		if ((SECONDS >= deadline)); then
			cr_kill_quiet "$name" || true
			cr_fail "sbatch of job $name still running after ${CR_TIMEOUT}s"
		fi
		sleep 0.1
	done
	cr_reap "$name"
}

# slurm_ranks NAME: pids of the job's ranks (CR_JOB mark, the program's exe).
slurm_ranks() {
	local pid
	for pid in $(cr_job_pids "$1"); do
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$CR_APP" ]] && echo "$pid"
	done
	return 0
}

# slurm_wait_line NAME REGEX [TIMEOUT]: wait until the batch job's stderr
# ($CR_TMP/NAME.err, sbatch -e) has a line matching REGEX; the job runs
# under slurmd, so only the clock ends the wait.
slurm_wait_line() {
	local name=$1 re=$2 timeout=${3:-$CR_TIMEOUT} deadline
	deadline=$((SECONDS + timeout))
	until grep -qE -- "$re" "$CR_TMP/$name.err"; do
		if ((SECONDS >= deadline)); then
			cr_show "$name"
			cr_fail "Slurm job $name did not print /$re/ within ${timeout}s"
		fi
		sleep 0.2
	done
}

# slurm_wait_commits NAME N [TIMEOUT]: the batch job committed N checkpoints.
slurm_wait_commits() {
	local name=$1 n=$2 timeout=${3:-$CR_TIMEOUT} deadline
	deadline=$((SECONDS + timeout))
	while (($(cr_commits "$name") < n)); do
		if ((SECONDS >= deadline)); then
			cr_show "$name"
			cr_fail "Slurm job $name committed $(cr_commits "$name") of $n checkpoints in ${timeout}s"
		fi
		sleep 0.2
	done
	cr_ok "Slurm job $name committed $n checkpoint(s), last id $(cr_last_commit "$name")"
}
