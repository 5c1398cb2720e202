#!/bin/bash
# flush.sh: the flush level (STASIS_FLUSH_DIR), end to end. 4 ranks on 2
# simulated nodes, each node with a directory of its own, xor sets of 2; a
# directory of the test's stands for the shared file system.
#   1. Bad settings stop the job at MPI_Init with one line naming them.
#   2. A run to completion with a flush at every checkpoint prints what the
#      uninterrupted run prints, never trips the "application threads"
#      refusal (the copy runs on a thread of stasis's), leaves the flush
#      level 0700/0600 with its marker, and STASIS_KEEP=1 holds there: at
#      most the kept checkpoint and the last one flushed.
#   3. A run killed once a checkpoint (an incremental chain) is flushed on
#      every rank, then EVERY node directory deleted, beyond what xor
#      rebuilds: stasis-restart fetches the newest flushed checkpoint back
#      and the job ends with the uninterrupted run's output.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

NODES=2
export CR_NP=4
cr_setup
root=$CR_TMP/ckpt
shared=$CR_TMP/shared
export STASIS_DIR=$root/node%n STASIS_FAILURE_DOMAIN=2 STASIS_SCHEME=xor STASIS_SET_SIZE=$NODES
cr_app heat
job=$(basename "$CR_APP")

# --- 1. settings ------------------------------------------------------------
STASIS_FLUSH_EVERY=2 cr_run_wait bad1
cr_expect_failure bad1
cr_expect_words bad1 "STASIS_FLUSH_EVERY without a directory" stasis STASIS_FLUSH_EVERY "'2'" STASIS_FLUSH_DIR
STASIS_FLUSH_DIR=relative/dir cr_run_wait bad2
cr_expect_failure bad2
cr_expect_words bad2 "a relative STASIS_FLUSH_DIR" stasis STASIS_FLUSH_DIR relative/dir absolute
STASIS_FLUSH_DIR=$shared STASIS_FLUSH_EVERY=0 cr_run_wait bad3
cr_expect_failure bad3
cr_expect_words bad3 "STASIS_FLUSH_EVERY=0" stasis STASIS_FLUSH_EVERY "'0'"
[[ ! -s $CR_TMP/bad1.out && ! -s $CR_TMP/bad2.out && ! -s $CR_TMP/bad3.out ]] ||
	cr_fail "the program ran despite a bad setting"

export STASIS_FLUSH_DIR=$shared

# flushed_ids DIR: ids of DIR whose commit record every rank has, ascending.
flushed_ids() {
	find "$1" -name 'ckpt-*.r*.done' -printf '%f\n' 2>/dev/null |
		sed -E 's/^ckpt-([0-9]+)\.r.*/\1/' | sort -n | uniq -c |
		awk -v np="$CR_NP" '$1 == np { print $2 }'
}

# --- 2. a complete run ------------------------------------------------------
cr_reference
STASIS_KEEP=1 STASIS_FULL_EVERY=1 STASIS_FLUSH_EVERY=1 cr_run_wait complete
cr_expect_status complete 0
cr_expect_same complete
cr_expect_line complete "is flushed to $shared on every rank" "a flush ended on every rank"
if grep -qiE 'thread' "$CR_TMP/complete.err"; then
	cr_show complete
	cr_fail "the flush thread was taken for an application thread"
fi
cr_ok "no warning about threads: the flush thread is stasis's"
[[ -f $shared/$job/flush-level ]] || cr_fail "no marker $shared/$job/flush-level"
[[ $(stat -c %a "$shared/$job") == 700 ]] || cr_fail "$shared/$job is not 0700"
bad=$(find "$shared/$job" -type f ! -perm 600)
[[ -z $bad ]] || cr_fail "files at the flush level not 0600: $bad"
ids=$(flushed_ids "$shared/$job" | tr '\n' ' ')
n=$(wc -w <<<"$ids")
((n >= 1 && n <= 2)) || cr_fail "STASIS_KEEP=1 at the flush level: $n complete checkpoints ($ids), expected the kept one and at most one newer"
left=$(find "$shared/$job" -name '*.tmp')
[[ -z $left ]] || cr_fail "temporaries left at the flush level: $left"
cr_ok "flush level after a complete run: checkpoints $ids, 0700/0600, marker, no temporaries"
rm -rf "${root:?}" "${shared:?}"

# --- 3. every node directory lost -------------------------------------------
STASIS_FULL_EVERY=3 STASIS_FLUSH_EVERY=2 cr_run killed
deadline=$((SECONDS + CR_TIMEOUT))
until [[ -n $(flushed_ids "$shared/$job" | grep -vx 1 || true) ]]; do
	cr_alive killed || {
		cr_show killed
		cr_fail "job ended before a checkpoint other than the first was flushed"
	}
	((SECONDS < deadline)) || cr_fail "no checkpoint flushed on every rank within ${CR_TIMEOUT}s"
	sleep 0.1
done
cr_kill killed
flushed=$(flushed_ids "$shared/$job" | tail -n 1)
local_newest=$(STASIS_DIR=$root cr_newest_complete)
cr_ok "flushed on every rank: $(flushed_ids "$shared/$job" | tr '\n' ' ')(newest $flushed); node-local newest $local_newest"
rm -rf "${root:?}"/node*
cr_ok "deleted the directories of all $NODES simulated nodes"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "checkpoint $flushed: fetched from the flush level" "the checkpoint came from the flush level"
cr_expect_line restart "resumed from checkpoint $flushed\\b" "resumed from the newest flushed checkpoint ($flushed)"
cr_expect_same restart
cr_pass "all node directories lost: resumed from flushed checkpoint $flushed, same output"
