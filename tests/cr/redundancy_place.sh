#!/bin/bash
# redundancy_place.sh host|rs-k|rs-256|partner-replicas: a redundancy scheme
# that was asked for but cannot be placed stops the job at MPI_Init with a
# line naming the problem, a non-zero status and no program output:
# stasis-run writes no checkpoint, stasis-restart (over checkpoints a good
# configuration took) changes none.
#   host              STASIS_SCHEME=xor, STASIS_FAILURE_DOMAIN=host: on one
#                     machine every rank shares one failure domain, so no
#                     set can hold one rank per domain. Without STASIS_SCHEME
#                     (the default, xor) the same only warns and runs.
#   rs-k              STASIS_SCHEME=rs STASIS_SET_SIZE=4 STASIS_RS_K=4 (k >=
#                     the set size)
#   rs-256            STASIS_SCHEME=rs STASIS_RS_K=250 with sets of 8 (set
#                     size + k > 256, beyond GF(2^8))
#   partner-replicas  STASIS_SCHEME=partner STASIS_PARTNER_REPLICAS=4 with
#                     sets of 4 (a rank cannot be its own partner)
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

mode=${1:?usage: redundancy_place.sh host|rs-k|rs-256|partner-replicas}
export CR_NP=8
cr_setup
root=$CR_TMP/ckpt
export STASIS_DIR=$root/node%n
unset STASIS_SCHEME STASIS_SET_SIZE STASIS_RS_K STASIS_PARTNER_REPLICAS STASIS_FAILURE_DOMAIN

case $mode in
host)
	bad=(STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=host STASIS_SET_SIZE=4)
	words=(stasis 'scheme xor' 'failure domains' 'STASIS_FAILURE_DOMAIN')
	;;
rs-k)
	bad=(STASIS_SCHEME=rs STASIS_FAILURE_DOMAIN=2 STASIS_SET_SIZE=4 STASIS_RS_K=4)
	words=(stasis 'scheme rs' 'k 4([^0-9]|$)' 'set')
	;;
rs-256)
	bad=(STASIS_SCHEME=rs STASIS_FAILURE_DOMAIN=1 STASIS_SET_SIZE=8 STASIS_RS_K=250)
	words=(stasis 'scheme rs' '250' '256')
	;;
partner-replicas)
	bad=(STASIS_SCHEME=partner STASIS_FAILURE_DOMAIN=2 STASIS_SET_SIZE=4 STASIS_PARTNER_REPLICAS=4)
	words=(stasis 'scheme partner' 'STASIS_PARTNER_REPLICAS' ' 3([^0-9]|$)' ' 4([^0-9]|$)')
	;;
*) cr_fail "unknown mode $mode" ;;
esac
cr_say "settings that cannot be placed: ${bad[*]}"

# Checkpoint files of every node (not the empty per-rank lock files any
# job creates at start), with their sha256.
snapshot() {
	(cd "$root" && find . -type f ! -name 'lock.r*' -exec sha256sum {} + | sort -k 2) >"$1"
}

# The job stopped at MPI_Init with the problem named, ran nothing, and every
# rank that reported it told the same story.
expect_stop() {
	local name=$1 n
	cr_expect_failure "$name"
	cr_expect_words "$name" "the error names the problem" "${words[@]}"
	[[ ! -s $CR_TMP/$name.out ]] || cr_fail "the program ran and printed: $(head -c 300 "$CR_TMP/$name.out")"
	if grep -qE "$CR_COMMIT_RE|resumed from checkpoint" "$CR_TMP/$name.err"; then
		cr_show "$name"
		cr_fail "job $name went on to checkpoint or resume"
	fi
	n=$(grep -iE "^stasis.*${words[1]}" "$CR_TMP/$name.err" | sed -E 's/^stasis(\[[0-9]+\])?: //' | sort -u | wc -l)
	((n == 1)) || {
		cr_show "$name"
		cr_fail "job $name gave $n different accounts of the problem"
	}
}

# stasis-run: stops before any checkpoint.
cr_app heat 128 300 # short: it must not get far anyway
export "${bad[@]}"
cr_run_wait bad_run
unset "${bad[@]%%=*}"
expect_stop bad_run
files=$(find "$root" -name 'ckpt-*' | head -n 3)
[[ -z $files ]] || cr_fail "stasis-run wrote checkpoint files despite the error: $files"
cr_ok "stasis-run refused the placement and wrote no checkpoint"

# stasis-restart over checkpoints of a good configuration (4 simulated
# nodes of 2 ranks): stops before touching them.
cr_app heat 512 4000
STASIS_SCHEME=xor STASIS_FAILURE_DOMAIN=2 STASIS_SET_SIZE=4 cr_run prep
cr_wait_commits prep 1
cr_kill prep
before=$CR_TMP/before.snapshot after=$CR_TMP/after.snapshot
snapshot "$before"
[[ -s $before ]] || cr_fail "the good configuration left no checkpoint files under $root"
export "${bad[@]}"
cr_restart bad_restart
unset "${bad[@]%%=*}"
expect_stop bad_restart
snapshot "$after"
if ! cmp -s "$before" "$after"; then
	diff -u "$before" "$after" || true
	cr_fail "stasis-restart changed checkpoint files despite the error"
fi
cr_ok "stasis-restart refused the placement, no checkpoint file changed ($(wc -l <"$before") files)"

if [[ $mode == host ]]; then
	# The default scheme where it cannot be placed: a warning, and the run
	# goes on unprotected.
	cr_app heat 128 300
	cr_reference
	STASIS_FAILURE_DOMAIN=host STASIS_SET_SIZE=4 cr_run_wait default_run
	cr_expect_status default_run 0
	cr_expect_words default_run "the default scheme warns that it cannot be placed" \
		stasis warning 'STASIS_SCHEME' 'cannot be placed'
	cr_expect_same default_run
fi
cr_pass "$mode: ${bad[*]} stops stasis-run and stasis-restart at start with a clear error"
