#!/bin/bash
# slurm-ci.sh (tests/lib/slurm.sh runs it; ../shared/SLURM.md has the why of
# every setting) up|down [DIR]: a one-node Slurm cluster on this machine for
# tests, from Debian 12 packages, as root, without systemd or cgroups.
#   up    write DIR/slurm.conf, start munged, slurmctld and slurmd, wait
#         until the node is idle; prints "export SLURM_CONF=DIR/slurm.conf"
#         With NODES > 1 (up DIR NODES): nodes n0..n<NODES-1>, one slurmd
#         each on this host (slurmd -N NAME, a port each: Debian's slurmd
#         is built with multiple-slurmd support), the CPUs shared out; the
#         environment of each slurmd and its slurmstepds has
#         SLURM_CI_NODE=NAME, so that a test can end a node whole.
#   down  cancel every job, stop the daemons (their PID files)
# Packages: slurm-wlm (slurmctld slurmd slurm-client slurm-wlm-basic-plugins
# munge) and libpmix-dev (the mpi/pmix plugin dlopens
# /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so; libopenmpi-dev depends on it).
set -euo pipefail
cmd=${1:?usage: slurm-ci.sh up|down [DIR [NODES]]}
D=${2:-${TMPDIR:-/tmp}/slurm-ci}
NODES=${3:-1}
export SLURM_CONF=$D/slurm.conf

up() {
	local host cpus mem i nodes nodelines spool=$D/spool pidfile=$D/slurmd.pid log=$D/log/slurmd.log
	host=$(hostname -s)
	cpus=$(nproc --all) # nproc alone honours OMP_NUM_THREADS
	mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))
	nodes=$host
	nodelines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN"
	if ((NODES > 1)); then
		nodes="n[0-$((NODES - 1))]"
		cpus=$((cpus / NODES > 0 ? cpus / NODES : 1))
		nodelines="NodeName=$nodes NodeHostname=$host NodeAddr=127.0.0.1 Port=[6818-$((6818 + NODES - 1))]"
		nodelines+=" CPUs=$cpus RealMemory=$((mem / NODES)) State=UNKNOWN"
		spool=$D/spool/%n pidfile=$D/slurmd.%n.pid log=$D/log/slurmd.%n.log
		# The PMIx plugin's client directory (spmix_appdir_UID_JOB.STEP in
		# TmpFS) names no node: the slurmstepds of one step would share it
		# ("Cannot create directory ... File exists", the launch fails).
		nodelines="TmpFS=$D/tmp/%n"$'\n'$nodelines
	fi
	# Fresh state every time: a slurmd killed uncleanly leaves PMIx sockets
	# (stepd.slurm.pmix.J.S: "Address already in use") and job ids are reused.
	rm -rf "$D"
	mkdir -p "$D/state" "$D/spool" "$D/log"
	cat >"$D/slurm.conf" <<EOF
ClusterName=ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$D/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$pidfile
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$log
# no cgroups: processes tracked through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
KillWait=5
# a loaded 2-core machine: generous RPC timeouts
MessageTimeout=60
SlurmdTimeout=600
# tasks get the nice value of srun (nice -n 19 srun: ranks at nice 19)
PropagatePrioProcess=1
# a SIGKILLed srun leaves its allocation behind; end it after 15 s
InactiveLimit=15
$nodelines
# jobs share the node (a restart starts while the killed job still ends)
PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
	# munge: the package's postinst made /etc/munge/munge.key
	if [[ ! -s /etc/munge/munge.key ]]; then
		dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
		chown munge:munge /etc/munge/munge.key
		chmod 0400 /etc/munge/munge.key
	fi
	install -d -o munge -g munge -m 0755 /run/munge
	# One munged per machine: use a running one, stop only ours at down.
	if ! { [[ -s /run/munge/munged.pid ]] && kill -0 "$(</run/munge/munged.pid)" 2>/dev/null; }; then
		runuser -u munge -- /usr/sbin/munged # daemonises; /run/munge/munged.pid
		touch "$D/munged.ours"
	fi
	/usr/sbin/slurmctld -f "$SLURM_CONF" # daemonises; SlurmctldPidFile
	# slurmstepd's PMIx server loads the hwloc topology with I/O devices: with
	# an OpenCL ICD installed (mesa-opencl-icd) that takes 20-70 s per job step.
	if ((NODES == 1)); then
		HWLOC_COMPONENTS=-opencl,-gl /usr/sbin/slurmd -f "$SLURM_CONF"
	else
		for ((i = 0; i < NODES; i++)); do
			mkdir -p "$D/spool/n$i" "$D/tmp/n$i" # slurmd makes only the last part of its spool
			SLURM_CI_NODE=n$i HWLOC_COMPONENTS=-opencl,-gl /usr/sbin/slurmd -f "$SLURM_CONF" -N "n$i"
		done
	fi
	for ((i = 0; i < 60; i++)); do
		[[ $(sinfo -h -o %T 2>/dev/null) == idle ]] && break
		sleep 1
	done
	[[ $(sinfo -h -o %T) == idle ]] || {
		echo "slurm-ci: node not idle after 60 s" >&2
		tail -n 20 "$D"/log/*.log >&2
		exit 1
	}
	echo "export SLURM_CONF=$SLURM_CONF"
}

# stop PIDFILE...: SIGTERM to every daemon named, then wait (10 s at most)
# until all are gone: they take about 2 s each, side by side rather than
# one after the other.
stop() {
	local f pid i alive
	local -a pids=()
	for f in "$@"; do
		[[ -s $f ]] || continue
		pid=$(<"$f")
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done
	for ((i = 0; i < 50; i++)); do
		alive=0
		for pid in "${pids[@]}"; do
			kill -0 "$pid" 2>/dev/null && alive=1
		done
		((alive)) || break
		sleep 0.2
	done
	return 0
}

down() {
	scancel --quiet --user=root 2>/dev/null || true
	stop "$D"/slurmd*.pid "$D/slurmctld.pid"
	# munged last: the others authenticate through it to the end.
	if [[ -e $D/munged.ours ]]; then stop /run/munge/munged.pid; fi
}

"$cmd"
