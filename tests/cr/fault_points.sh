#!/bin/bash
# fault_points.sh checkpoint|restart: every fault point of util/fault.c
# (STASIS_FAULT) hit at its real failure site, each asserting that the run
# goes on and that the previous checkpoint stays usable. 4 ranks on 4
# simulated nodes, xor over sets of 4, so that every checkpoint is encoded
# and every restart here has a lost node to rebuild.
#   checkpoint  one run whose checkpoints fail one after another, each at
#               another step (collect, write, sync, install, the encode's
#               read, create, exchange, finish and install, an image
#               truncated behind the encode's back; a commit
#               record on one rank), on one rank: the run must end with
#               the uninterrupted output, the failed checkpoints must have
#               no commit record, the next one must commit. Then, for each
#               failed checkpoint k, newest first: the checkpoints from k
#               on are removed and one node's image of k-1 deleted, and a
#               restart must rebuild it and resume from k-1 (the oldest
#               one runs to the end and must print the uninterrupted output).
#   restart     with node 1 lost, one restart in which the restore and the
#               rebuild fail at each step, each for another checkpoint,
#               newest first (open, read; create, exchange, a corrupt
#               rebuilt file caught by its checksum, install): it must fall
#               back past each to the next older one and resume with the
#               uninterrupted output; then a restart without faults must
#               still rebuild and resume from the newest (nothing was
#               damaged), with the prune after a later commit failing once
#               (the next prune must catch up).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: fault_points.sh checkpoint|restart}
export CR_NP=4
cr_setup
root=$CR_TMP/ckpt
export STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=1 STASIS_SET_SIZE=4 STASIS_DIR=$root/node%n
export STASIS_KEEP=1000
# Sized for ~25 checkpoints every 0.1 s on a loaded 2-core machine; full_run
# lengthens it where the machine is quicker.
cr_app heat 256 12000
all() { STASIS_DIR=$root "$@"; }
done_ranks() { find "$root" -name "ckpt-$1.r*.done" | wc -l; }

# A run to the end with a checkpoint every 0.1 s, at least NEED of them
# (iterations double until there are: sized by counting, not guessing).
full_run() {
	local need=$1 try at got
	for ((try = 1; ; try++)); do
		rm -rf "${root:?}"/*
		cr_reference 0
		cr_run_wait run
		cr_expect_status run 0
		cr_expect_same run
		(($(cr_commits run) >= need)) && break
		((try < 6)) || cr_fail "the job committed $(cr_commits run) checkpoints after $try tries, $need needed"
		at=$(cr_iters_index)
		got=$(cr_commits run)
		CR_ARGS[at]=$((CR_ARGS[at] * ((need * 5 / 4 + got) / (got + 1) > 2 ? (need * 5 / 4 + got) / (got + 1) : 2)))
		cr_say "$got checkpoints, $need needed: iterations -> ${CR_ARGS[at]}"
	done
	cr_ok "the run went on to the end with the uninterrupted output ($(cr_commits run) commits)"
}

# The line saying that point fired in checkpoint id on rank.
expect_fired() {
	cr_expect_line "$1" "^stasis\\[$4\\]: warning: fault $2 injected in checkpoint $3\$" "fault $2 fired in checkpoint $3 on rank $4"
}

export STASIS_INTERVAL=0.1
if [[ $mode == checkpoint ]]; then
	# point:checkpoint@rank, each failing the whole checkpoint.
	faults=(fail-collect:2@1 fail-write:4@2 fail-image-sync:6@3 fail-image-install:8@0
		fail-encode-read:10@1 fail-encode-create:12@2 fail-encode-run:14@3
		fail-encode-finish:16@0 fail-encode-install:18@1 truncate-encode:20@2)
	STASIS_FAULT=$(IFS=,; echo "${faults[*]},fail-commit:22@2,buffered-write:24") full_run 26
	for f in "${faults[@]}"; do
		point=${f%%:*} k=${f#*:} r=${k#*@} k=${k%@*}
		expect_fired run "$point" "$k" "$r"
		cr_expect_line run "^stasis\\[0\\]: warning: checkpoint $k failed on some rank" "checkpoint $k failed"
		(($(done_ranks "$k") == 0)) || cr_fail "failed checkpoint $k has a commit record"
		cr_expect_line run "checkpoint $((k + 1)) committed" "the next checkpoint, $((k + 1)), committed"
	done
	# A commit record that one rank could not write: the checkpoint is
	# complete all the same (the others' records prove it).
	expect_fired run fail-commit 22 2
	cr_expect_line run "checkpoint 22 committed" "checkpoint 22 committed without rank 2's record"
	(($(done_ranks 22) == 3)) || cr_fail "checkpoint 22: $(done_ranks 22) commit records, 3 expected"
	cr_expect_line run "checkpoint 24 committed" "checkpoint 24 committed with buffered writes"
	# The truncated image: an error naming the cause, never SIGBUS.
	cr_expect_line run "^stasis\\[2\\]: .*a file to protect shrank while it was read" "the image truncated during the encode of 20 was an error on rank 2"

	# Newest first: keep only what precedes k, lose one node's image of
	# k-1, and resume from it (the oldest runs to the end).
	export STASIS_INTERVAL=600
	unset STASIS_FAULT
	for ((i = ${#faults[@]}; i >= 0; i--)); do
		if ((i == ${#faults[@]})); then
			k=23
		else
			f=${faults[i]} k=${faults[i]#*:} && k=${k%@*}
		fi
		prev=$((k - 1))
		find "$root" -name 'ckpt-*' | while read -r file; do
			id=${file##*/ckpt-}
			((${id%%.*} < k)) || rm -f "$file"
		done
		lost=$((prev % 4))
		img=$(all cr_ckpt_file "$prev" "$lost" img)
		[[ -n $img ]] || cr_fail "no image of rank $lost for checkpoint $prev"
		rm -f "$img"
		cr_restart_bg "from$prev"
		if ((i > 0)); then
			cr_wait_line "from$prev" 'resumed from checkpoint'
			cr_kill "from$prev"
		else
			cr_wait_exit "from$prev"
			cr_expect_status "from$prev" 0
			cr_expect_same "from$prev"
		fi
		cr_expect_line "from$prev" 'rebuilt lost or damaged images' "rank $lost's image of $prev rebuilt"
		cr_expect_line "from$prev" "resumed from checkpoint $prev\\b" "checkpoint $prev, before the fault in $k, usable"
	done
	cr_pass "${#faults[@]} checkpoint fault points and fail-commit, buffered-write: the run went on, every previous checkpoint stayed usable"
fi

# restart: every image full (no chains), so that each fault hits the one
# checkpoint it names.
export STASIS_DIRTY=off
full_run 14
# Drop the 6 newest: the restarts below must have room to commit.
for drop in 1 2 3 4 5 6; do
	id=$(all cr_newest_complete)
	find "$root" -name "ckpt-$id.*" -delete
done
n=$(all cr_newest_complete)
cr_ok "newest complete checkpoint $n"
rm -rf "$root/node1"
faults=(fail-restore-open:$n@2 fail-restore-read:$((n - 1))@3 fail-rebuild-create:$((n - 2))@1
	fail-rebuild-run:$((n - 3))@0 corrupt-rebuild:$((n - 4))@1 fail-rebuild-install:$((n - 5))@1)
STASIS_INTERVAL=600 STASIS_FAULT=$(IFS=,; echo "${faults[*]}") cr_restart faulty
cr_expect_status faulty 0
cr_expect_same faulty
for f in "${faults[@]}"; do
	point=${f%%:*} k=${f#*:} r=${k#*@} k=${k%@*}
	expect_fired faulty "$point" "$k" "$r"
	cr_expect_line faulty "warning: checkpoint $k cannot be used" "checkpoint $k given up"
done
cr_expect_line faulty "rebuilt .*ckpt-$((n - 4))\\.r1\\.img fails its crc64 check" "the corrupt rebuilt image was caught by its checksum"
cr_expect_line faulty "resumed from checkpoint $((n - 6))\\b" "fell back to checkpoint $((n - 6))"

# Nothing was damaged: lose node 1 again, the newest must rebuild and resume.
rm -rf "$root/node1"
before=$(all cr_newest_complete)
STASIS_KEEP=2 STASIS_FAULT=fail-prune:$((before + 2))@0 cr_restart clean
cr_expect_status clean 0
cr_expect_same clean
cr_expect_line clean 'rebuilt lost or damaged images' "node 1 rebuilt again"
cr_expect_line clean "resumed from checkpoint $before\\b" "the newest, $before, stayed usable"
expect_fired clean fail-prune $((before + 2)) 0
cr_expect_line clean "^stasis\\[0\\]: retention: warning: cannot remove checkpoint [0-9]+ .*the next commit tries again" "the failed prune said so"
(($(cr_commits clean) >= 3)) || cr_fail "the restart committed $(cr_commits clean) checkpoints, 3 needed for a prune after the failed one"
left=$(find "$root/node0" -name 'ckpt-*.r0.*' -printf '%f\n' | sed -E 's/^ckpt-([0-9]+)\..*/\1/' | sort -u | wc -l)
((left == 2)) || cr_fail "rank 0 holds $left checkpoints after the last prune, STASIS_KEEP=2"
cr_ok "the next prune caught up: rank 0 holds 2 checkpoints"
cr_pass "${#faults[@]} restart fault points and fail-prune: every restart fell back or resumed with the uninterrupted output"
