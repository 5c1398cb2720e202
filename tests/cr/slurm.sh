#!/bin/bash
# slurm.sh CASE: stasis under Slurm, on a one-node cluster the test starts
# and stops (tests/lib/slurm.sh). Every run goes through srun --mpi=pmix.
#   roundtrip    stasis-run srun, SIGKILL of the ranks after two checkpoints,
#                stasis-restart srun: the uninterrupted run's output
#   export-none  srun --export=NONE, and SLURM_EXPORT_ENV=NONE: stasis still
#                in every rank (it checkpoints, its settings reached them)
#   no-pmix      an Open MPI program under srun --mpi=none: one line saying so
#   time-limit   an sbatch job checkpointed STASIS_BEFORE_LIMIT seconds
#                before its time limit, ended by Slurm at the limit, resumed
#                by a second job (stasis-restart) to the uninterrupted output
#   requeue      a job requeued after two checkpoints continues by itself
#                (stasis-run, SLURM_RESTART_COUNT) to the uninterrupted output
#   lost-node    four nodes (four slurmds on this host), one rank each, xor
#                sets of 4, each node's checkpoints in a directory of its
#                own: node n1 is lost after two checkpoints (its slurmd, its
#                slurmstepd and rank 1 SIGKILLed, its directory removed);
#                stasis-run --restarts relaunches inside the --no-kill
#                allocation without n1, the restart through srun rebuilds
#                rank 1's files from the others' and the job ends with the
#                uninterrupted output
#   yield        under srun, ranks over the node's cores yield when idle
#                (mpi_yield_when_idle as Open MPI took it, read back through
#                MPI_T), ranks within them do not, and a setting given wins
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"
# shellcheck source=../lib/slurm.sh
source "$(dirname "$0")/../lib/slurm.sh"

case=${1:?usage: slurm.sh roundtrip|export-none|no-pmix|time-limit|requeue|lost-node|yield}
CR_NP=${CR_NP:-2}
nodes=1
[[ $case == lost-node ]] && CR_NP=4 nodes=4
cr_setup
slurm_setup "$nodes"

# batch NAME BODY...: a batch script running the lines BODY.
batch() {
	local name=$1
	shift
	{
		echo '#!/bin/bash'
		printf '%s\n' "$@"
	} >"$CR_TMP/$name.sh"
}

case $case in
roundtrip)
	cr_app heat
	cr_reference
	cr_kill_restart_same 2
	newest=$CR_NEWEST
	cr_pass "through srun: killed after 2 checkpoints, restarted from $newest, same output"
	;;
export-none)
	cr_app heat
	cr_reference
	# A setting that must reach the ranks: the job's directory name.
	export STASIS_JOB=exported
	# shellcheck disable=SC2046
	cr_start none "$CR_STASIS_RUN" $(cr_mpirun) --export=NONE "$CR_APP" "${CR_ARGS[@]}"
	cr_wait_exit none
	cr_expect_status none 0
	cr_expect_same none
	(($(cr_commits none) >= 1)) || cr_fail "srun --export=NONE: no checkpoint (stasis did not reach the ranks)"
	ls "$STASIS_DIR"/exported/ckpt-*.done >/dev/null 2>&1 ||
		cr_fail "srun --export=NONE: no checkpoint under STASIS_JOB=exported (STASIS_* did not reach the ranks)"
	cr_ok "srun --export=NONE: $(cr_commits none) checkpoint(s) in $STASIS_DIR/exported"
	export STASIS_JOB=exported2
	# shellcheck disable=SC2046
	cr_start envnone env SLURM_EXPORT_ENV=NONE "$CR_STASIS_RUN" $(cr_mpirun) "$CR_APP" "${CR_ARGS[@]}"
	cr_wait_exit envnone
	cr_expect_status envnone 0
	cr_expect_same envnone
	ls "$STASIS_DIR"/exported2/ckpt-*.done >/dev/null 2>&1 ||
		cr_fail "SLURM_EXPORT_ENV=NONE: no checkpoint under STASIS_JOB=exported2"
	cr_pass "srun --export=NONE and SLURM_EXPORT_ENV=NONE: stasis and its settings in every rank"
	;;
no-pmix)
	cr_app heat 64 10
	cr_start nopmix "$CR_STASIS_RUN" srun -n 2 --mpi=none "$CR_APP" "${CR_ARGS[@]}"
	cr_wait_exit nopmix
	cr_expect_failure nopmix
	cr_expect_line nopmix "without PMIx \\(--mpi=none\\): run it with srun --mpi=pmix" "told to use --mpi=pmix"
	if grep -q "OPAL ERROR" "$CR_TMP/nopmix.err"; then
		cr_show nopmix
		cr_fail "Open MPI's OPAL ERROR printed, not only stasis's line"
	fi
	cr_pass "srun --mpi=none: one line naming --mpi=pmix"
	;;
time-limit)
	# A job of 1 minute (Slurm's least time limit) that asks for its
	# checkpoint STASIS_BEFORE_LIMIT=50 s before the limit, 10 s in. The
	# test holds the ranks (SIGSTOP) from the moment they catch the request
	# signal to the request, and again once the checkpoint is committed, so
	# that a program of a few seconds (the shared reference size) is still
	# running at the request and at the limit. Slurm ends the job at the
	# limit (slurmctld looks every 30 s, hard-coded: PERIODIC_TIMEOUT), a
	# second job resumes from the checkpoint.
	cr_app heat
	cr_reference
	export STASIS_INTERVAL=1000 STASIS_BEFORE_LIMIT=50
	batch first "$CR_STASIS_RUN $(cr_mpirun) $CR_APP ${CR_ARGS[*]}"
	cr_start first sbatch -t 1 -n "$CR_NP" -O -o "$CR_TMP/first.job.out" -e "$CR_TMP/first.err" \
		--open-mode=append "$CR_TMP/first.sh"
	slurm_submitted first
	cr_expect_status first 0
	id=$(slurm_job_id "$CR_TMP/first.out")
	# Every rank catches SIGUSR1 (stasis's checkpoint request, set once its
	# MPI_Init is done): from then on a request cannot end it.
	deadline=$((SECONDS + 60))
	while :; do
		ranks=$(slurm_ranks first)
		caught=0
		for pid in $ranks; do
			mask=$(sed -n 's/^SigCgt:\t*//p' "/proc/$pid/status" 2>/dev/null)
			[[ -n $mask ]] && (((0x$mask >> 9) & 1)) && caught=$((caught + 1))
		done
		((caught == CR_NP)) && break
		((SECONDS < deadline)) || { cr_show first; cr_fail "$caught of $CR_NP ranks of job $id catch SIGUSR1 after 60 s"; }
		sleep 0.2
	done
	# shellcheck disable=SC2086
	kill -STOP $ranks
	cr_ok "the $CR_NP ranks of job $id are ready for a checkpoint request, held until it comes"
	slurm_wait_line first "checkpoint requested" 60
	# shellcheck disable=SC2086
	kill -CONT $ranks
	slurm_wait_commits first 1 30
	committed=$(date +%s)
	# shellcheck disable=SC2086
	kill -STOP $ranks 2>/dev/null || cr_fail "the ranks ended before the time limit"
	end=$(date -d "$(squeue -h -j "$id" -o %e)" +%s)
	grep -E "checkpoint requested|committed" "$CR_TMP/first.err"
	cr_say "checkpoint committed $((end - committed)) s before the time limit (squeue's end $(date -d "@$end" +%T))"
	((end - committed > 0)) || cr_fail "the checkpoint was committed after the time limit"
	slurm_wait_gone "$id" 120
	state=$(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' || true)
	cr_say "first job: $state"
	[[ -z $state || $state == JobState=TIMEOUT ]] || cr_fail "first job ended $state, not at its time limit"
	# Without --wait, whose polling sleeps up to 10 s: the queue is asked twice a second.
	batch second "$CR_STASIS_RESTART $(cr_mpirun) $CR_APP ${CR_ARGS[*]}"
	cr_start second sbatch -t 5 -n "$CR_NP" -O -o "$CR_TMP/second.job.out" -e "$CR_TMP/second.err" \
		--open-mode=append "$CR_TMP/second.sh"
	slurm_submitted second
	cr_expect_status second 0
	id2=$(slurm_job_id "$CR_TMP/second.out")
	slurm_wait_gone "$id2" "$CR_TIMEOUT"
	state=$(scontrol show job "$id2" | grep -oE ' (JobState|ExitCode)=[^ ]+' | paste -sd' ')
	[[ $state =~ JobState=COMPLETED && $state =~ \ ExitCode=0:0 ]] || { cr_show second; cr_fail "second job:$state"; }
	cr_expect_line second "resumed from checkpoint" "the second job resumed from the checkpoint before the limit"
	cp "$CR_TMP/second.job.out" "$CR_TMP/second.out"
	cr_expect_same second
	cr_pass "checkpointed $((end - committed)) s before the time limit, resumed by the next job, same output"
	;;
requeue)
	cr_app heat
	cr_reference
	batch job "$CR_STASIS_RUN $(cr_mpirun) $CR_APP ${CR_ARGS[*]}"
	cr_start job sbatch --requeue -n "$CR_NP" -O -o "$CR_TMP/job.job.out" -e "$CR_TMP/job.err" \
		--open-mode=append "$CR_TMP/job.sh"
	slurm_submitted job
	cr_expect_status job 0
	id=$(slurm_job_id "$CR_TMP/job.out")
	slurm_wait_commits job 2 60
	scontrol requeue "$id"
	cr_ok "requeued Slurm job $id after 2 checkpoints"
	deadline=$((SECONDS + CR_TIMEOUT))
	until grep -q "Slurm requeued job" "$CR_TMP/job.err"; do
		((SECONDS < deadline)) || { cr_show job; cr_fail "the requeued job did not start again"; }
		# A requeued job waits for a begin time: start it now.
		scontrol update JobId="$id" StartTime=now 2>/dev/null || true
		sleep 1
	done
	slurm_wait_gone "$id" "$CR_TIMEOUT"
	cr_expect_line job "resumed from checkpoint" "the requeued job resumed from a checkpoint"
	cp "$CR_TMP/job.job.out" "$CR_TMP/job.out"
	cr_expect_same job
	cr_pass "requeued after 2 checkpoints, continued by itself, same output"
	;;
lost-node)
	root=$CR_TMP/ckpt
	# Each rank is a failure domain of its own and keeps its files in
	# node<rank>: one rank per node in the first launch, so node<r> is the
	# storage of node n<r> (stasis reads a rank's files where its domain
	# put them; it does not move them between nodes, as SCR's distribute does).
	export STASIS_SCHEME=xor STASIS_SET_SIZE=4 STASIS_FAILURE_DOMAIN=1 STASIS_DIR=$root/node%n
	cr_app heat
	cr_reference
	batch job "$CR_STASIS_RUN --restarts 2 $(cr_mpirun) $CR_APP ${CR_ARGS[*]}"
	cr_start job sbatch --no-kill -N 4 -n "$CR_NP" -O -o "$CR_TMP/job.job.out" -e "$CR_TMP/job.err" \
		--open-mode=append "$CR_TMP/job.sh"
	slurm_submitted job
	cr_expect_status job 0
	id=$(slurm_job_id "$CR_TMP/job.out")
	slurm_wait_commits job 2 60
	rank=
	for pid in $(slurm_ranks job); do
		grep -qzx SLURMD_NODENAME=n1 "/proc/$pid/environ" 2>/dev/null &&
			rank=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^SLURM_PROCID=//p')
	done
	[[ $rank == 1 ]] || cr_fail "rank on node n1: '$rank', expected 1 (one rank per node, in order)"
	# The node is lost: every process of it at once, and its storage.
	# shellcheck disable=SC2046
	kill -9 $(slurm_node_pids n1)
	rm -rf "$root/node1"
	newest=$(STASIS_DIR=$root cr_newest_complete)
	cr_ok "node n1 lost (slurmd, slurmstepd, rank 1 SIGKILLed; $root/node1 removed), newest complete checkpoint $newest"
	deadline=$((SECONDS + CR_TIMEOUT))
	while [[ $(squeue -h -j "$id" -o %T 2>/dev/null) == RUNNING ]]; do
		((SECONDS < deadline)) || { cr_show job; cr_fail "job $id still running after ${CR_TIMEOUT}s"; }
		sleep 0.5
	done
	# The job ends COMPLETING: n1's slurmd never reports its end.
	state=$(scontrol show job "$id" | grep -oE 'JobState=[A-Z]+|ExitCode=[0-9:]+' | paste -sd' ')
	cr_say "job $id: $state"
	cr_expect_line job "lost node\(s\) n1 \(its slurmd .* does not answer\): the relaunch leaves out n1 \(3 node" \
		"stasis-run found n1 lost and left it out"
	cr_expect_line job 'stasis(\[[0-9]+\])?: .*rebuilt lost or damaged images' "rank 1's files rebuilt"
	cr_expect_line job "resumed from checkpoint $newest\b" "resumed from the newest complete checkpoint ($newest)"
	cr_expect_line job "completed after 1 relaunch" "the job completed after one relaunch"
	[[ $state == *ExitCode=0:0* ]] || cr_fail "job $id: $state, expected ExitCode=0:0"
	[[ -n $(find "$root/node1" -name 'ckpt-*.r1.img' 2>/dev/null) ]] || cr_fail "no image of rank 1 in $root/node1 after the relaunch"
	cp "$CR_TMP/job.job.out" "$CR_TMP/job.out"
	cr_expect_same job
	cr_pass "node n1 lost: relaunched without it in the same allocation, rank 1 rebuilt, same output"
	;;
yield)
	cr_app yield
	unset OMPI_MCA_mpi_yield_when_idle
	cores=$(nproc --all)
	# expect NAME RUN N WANT [ENV...]: N ranks under srun, through RUN
	# (stasis-run, or env: without stasis), each must report
	# mpi_yield_when_idle=WANT.
	expect() {
		local name=$1 run=$2 n=$3 want=$4 got what
		shift 4
		what="$n ranks on $cores cores${*:+ ($*)}, $(basename "$run")"
		cr_start "$name" env "$@" "$run" srun -J yield -n "$n" --overcommit --mpi=pmix "$CR_APP"
		cr_wait_exit "$name"
		cr_expect_status "$name" 0
		got=$(grep -c "mpi_yield_when_idle=$want\$" "$CR_TMP/$name.out" || true)
		if ((got != n)); then
			cr_show "$name"
			cr_fail "$what: $got of $n ranks report mpi_yield_when_idle=$want"
		fi
		cr_ok "$what: every rank has mpi_yield_when_idle=$want"
	}
	# Without stasis, Open MPI under srun does not yield: what stasis changes.
	expect plain env $((cores * 2)) 0
	expect over "$CR_STASIS_RUN" $((cores * 2)) 1
	expect within "$CR_STASIS_RUN" "$cores" 0
	expect given "$CR_STASIS_RUN" $((cores * 2)) 0 OMPI_MCA_mpi_yield_when_idle=0
	cr_pass "under srun, stasis makes ranks over the cores yield when idle, not ranks within them; a given setting wins"
	;;
*) cr_fail "unknown case '$case'" ;;
esac
