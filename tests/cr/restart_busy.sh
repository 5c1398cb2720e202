#!/bin/bash
# restart_busy.sh: a checkpoint wanted while a restart is still restoring.
# With STASIS_INTERVAL=0.01 rank 0's timer fires long before the ranks
# have rebuilt lost files and put their memory back; the attempt must
# wait for every rank to resume, then be taken: the restarted job commits
# checkpoints of its own, ends, and gives the uninterrupted output. (An
# attempt agreed during the restore used to be forgotten by the resuming
# ranks, and the job hung in MPI_Finalize.) Two restarts with node 1's
# files lost (a slow restore: a rebuild first), two without.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export CR_NP=2
cr_setup
export STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=1 STASIS_SET_SIZE=2
export STASIS_DIR=$CR_TMP/ckpt/node%n
root=$CR_TMP/ckpt
cr_app heat 256 4000
cr_reference 2
cr_run prep
cr_wait_commits prep 2
cr_kill prep
newest=$(STASIS_DIR=$root cr_newest_complete)
saved=$CR_TMP/saved
cp -a "$root" "$saved"

for lose in 1 0; do
	for t in 1 2; do
		name=r$lose$t
		rm -rf "$root"
		cp -a "$saved" "$root"
		((lose)) && rm -rf "$root/node1"
		STASIS_INTERVAL=0.01 cr_restart "$name"
		cr_expect_status "$name" 0
		cr_expect_line "$name" "resumed from checkpoint $newest\\b" "restart $name resumed from $newest"
		((lose == 0)) || cr_expect_line "$name" 'rebuilt lost or damaged images' "restart $name rebuilt node 1's files first"
		# grep without -q: it must read to the end, or sed gets SIGPIPE
		# and pipefail fails the line when many checkpoints follow.
		sed -n '/resumed from checkpoint/,$p' "$CR_TMP/$name.err" | grep -E "$CR_COMMIT_RE" >/dev/null ||
			{ cr_show "$name"; cr_fail "restart $name committed no checkpoint after it resumed"; }
		cr_expect_same "$name"
	done
done
cr_pass "four restarts with a checkpoint wanted from their start: each resumed, checkpointed and ended with the uninterrupted output"
