#!/bin/bash
# redundancy.sh SCHEME [--k K] [--lose N] [--corrupt|--corrupt-all] [APP [ARGS...]]:
# redundancy across ranks (DESIGN.md section 6), end to end.
#
# 8 ranks on 4 simulated nodes (STASIS_FAILURE_DOMAIN=2), each node with a
# checkpoint directory of its own (STASIS_DIR=<tmp>/ckpt/node%n), sets of 4,
# so that each set holds one rank per node: set 0 = ranks 0,2,4,6, set 1 =
# ranks 1,3,5,7. Run under stasis, SIGKILL everything after two committed
# checkpoints, damage the checkpoint files, restart:
#   (default)      delete the directories of N simulated nodes (--lose N,
#                  default 1): each set loses N members, every checkpoint
#   --corrupt      flip one byte of the newest image of N ranks of set 1
#                  (3, then 5, 7, 1): set 0, with rank 0, stays whole
#   --corrupt-all  the same in every image of those ranks
#   --corrupt-red  flip one byte of the newest redundancy file of rank 3
#                  and delete the newest image of rank 5 (both in set 1):
#                  two losses in one set
# Within the scheme's tolerance (partner: replicas, xor: 1, rs: k): the
# restart warns that it rebuilt lost or damaged images, resumes from the
# newest checkpoint and prints exactly what an uninterrupted run prints.
# Beyond it:
#   - older checkpoints intact (--corrupt, --corrupt-red): a warning naming the set, the
#     lost ranks and the tolerance, and the restart resumes from an older
#     checkpoint with the same output;
#   - no checkpoint usable: the restart exits non-zero with an error line
#     naming the set, the lost ranks and the tolerance, and every remaining
#     checkpoint file is unchanged.
#
# --k K sets STASIS_RS_K (rs, default 2) or STASIS_PARTNER_REPLICAS
# (partner, default 1).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

usage='usage: redundancy.sh partner|xor|rs [--k K] [--lose N] [--corrupt|--corrupt-all|--corrupt-red] [APP [ARGS...]]'
scheme=${1:?$usage}
shift
k=
lose=1
damage=delete
while (($# > 0)); do
	case $1 in
	--k) k=${2:?$usage} && shift 2 ;;
	--lose) lose=${2:?$usage} && shift 2 ;;
	--corrupt) damage=corrupt && shift ;;
	--corrupt-all) damage=corrupt-all && shift ;;
	--corrupt-red) damage=corrupt-red && shift ;;
	--*) cr_fail "unknown option $1 ($usage)" ;;
	*) break ;;
	esac
done

NODES=4
PER_NODE=2
export CR_NP=$((NODES * PER_NODE))
cr_setup
root=$CR_TMP/ckpt
export STASIS_SCHEME=$scheme
export STASIS_FAILURE_DOMAIN=$PER_NODE
export STASIS_SET_SIZE=$NODES
export STASIS_DIR=$root/node%n
unset STASIS_RS_K STASIS_PARTNER_REPLICAS
case $scheme in
partner)
	tolerance=${k:-1}
	[[ -z $k ]] || export STASIS_PARTNER_REPLICAS=$k
	;;
xor)
	[[ -z $k ]] || cr_fail "--k does not apply to xor"
	tolerance=1
	;;
rs)
	tolerance=${k:-2}
	[[ -z $k ]] || export STASIS_RS_K=$k
	;;
*) cr_fail "unknown scheme $scheme ($usage)" ;;
esac
((lose >= 1 && lose <= NODES)) || cr_fail "--lose $lose: must be 1..$NODES"
cr_say "scheme $scheme tolerates $tolerance lost member(s) per set; $NODES nodes of $PER_NODE ranks, sets of $NODES"

if (($# > 0)); then
	cr_app "$@"
else
	# ~2 s uninterrupted with 8 ranks on 2 quiet cores: cr_reference
	# lengthens it to what the checkpoints need.
	cr_app heat 512 4000
fi

# cr.sh's functions that search STASIS_DIR, over every node's directory.
all() { STASIS_DIR=$root "$@"; }

# Every node's checkpoint files, not the per-rank lock files (lock.r<rank>,
# empty) that any job, even one that stops at once, creates in its node's
# directory: they hold no checkpoint data.
CR_SNAPSHOT_SKIP='lock.r*'

cr_reference
cr_run prep
cr_wait_commits prep 2
cr_kill prep
newest=$(all cr_newest_complete)
[[ -n $newest ]] || cr_fail "no commit record (ckpt-*.done) under $root"
for ((n = 0; n < NODES; n++)); do
	[[ -d $root/node$n/$(basename "$CR_APP") ]] ||
		cr_fail "no job directory for simulated node $n in $root/node$n"
done
for ((r = 0; r < CR_NP; r++)); do
	img=$(all cr_ckpt_file "$newest" "$r" img)
	[[ -n $img ]] || cr_fail "no image of rank $r for checkpoint $newest"
	[[ $img == "$root/node$((r / PER_NODE))/"* ]] || cr_fail "rank $r's image is not on its node's directory: $img"
	[[ -n $(all cr_ckpt_file "$newest" "$r" red) ]] || cr_fail "no redundancy file of rank $r for checkpoint $newest"
done
cr_ok "checkpoint $newest: image and redundancy file of each of the $CR_NP ranks in its node's directory"

lost_ranks=()
case $damage in
delete)
	# Nodes chosen so that rank 0 (which prints) is lost whenever 2 are.
	case $lose in
	1) victims=(1) ;;
	2) victims=(0 2) ;;
	3) victims=(0 1 3) ;;
	4) victims=(0 1 2 3) ;;
	esac
	for n in "${victims[@]}"; do
		rm -rf "${root:?}/node$n"
		for ((r = n * PER_NODE; r < (n + 1) * PER_NODE; r++)); do lost_ranks+=("$r"); done
		cr_ok "deleted the directory of simulated node $n (ranks $((n * PER_NODE))-$(((n + 1) * PER_NODE - 1)))"
	done
	;;
corrupt-red)
	# Rank 5's image is gone, and the redundancy file of rank 3 (same set)
	# is damaged: rebuilding 5 from it would spread the damage, so it
	# counts as a second loss in that set.
	lost_ranks=(3 5)
	lose=2
	cr_flip_byte "$(all cr_ckpt_file "$newest" 3 red)"
	rm -f "$(all cr_ckpt_file "$newest" 5 img)"
	cr_ok "removed the image of rank 5 of checkpoint $newest"
	;;
corrupt | corrupt-all)
	set1=(3 5 7 1)
	lost_ranks=("${set1[@]:0:lose}")
	for r in "${lost_ranks[@]}"; do
		if [[ $damage == corrupt ]]; then
			cr_flip_byte "$(all cr_ckpt_file "$newest" "$r" img)"
		else
			while read -r img; do cr_flip_byte "$img"; done < <(find "$root" -name "ckpt-*.r$r.img")
		fi
	done
	;;
esac
before=$CR_TMP/before.snapshot
cr_snapshot "$before" "$root"

cr_restart restart

# The line (of the kind that grep -v $3 leaves) naming the set, its lost ranks
# and the tolerance; every lost rank of that set must be among them.
expect_set_line() {
	local name=$1 what=$2 skip=$3 line members named nnamed=0 r
	grep -vE -- "$skip" "$CR_TMP/$name.err" >"$CR_TMP/$name-lines.err" || true
	cr_expect_words "$name-lines" "$what" \
		'stasis' 'set [0-9]+ \(ranks [0-9,]+\)' 'lost ranks [0-9]' "tolerates $tolerance([^0-9]|$)"
	line=$(grep -m 1 -iE 'stasis.*set [0-9]+ \(ranks [0-9,]+\).*lost ranks.*tolerates' "$CR_TMP/$name-lines.err")
	members=$(sed -E 's/.*set [0-9]+ \(ranks ([0-9,]+)\).*/\1/' <<<"$line")
	named=$(sed -E 's/.*lost ranks ([^;]*);.*/\1/; s/ \(redundancy file\)//g' <<<"$line")
	for r in "${lost_ranks[@]}"; do
		[[ ,$members, == *,$r,* ]] || continue
		[[ ,$named, == *,$r,* ]] || cr_fail "the line does not name lost rank $r of its set: $line"
		nnamed=$((nnamed + 1))
	done
	((nnamed == lose)) || cr_fail "the line names a set with $nnamed of the lost ranks (${lost_ranks[*]}), $lose expected: $line"
	cr_ok "the line names all $lose lost ranks ($named) of the set of ranks $members"
}

if ((lose > tolerance)) && [[ $damage == corrupt || $damage == corrupt-red ]]; then
	# Beyond tolerance in the newest checkpoint only: fall back to an older one.
	cr_expect_status restart 0
	expect_set_line restart "the warning names the set, the lost ranks and the tolerance" '^$'
	resumed=$(grep -oE 'resumed from checkpoint [0-9]+' "$CR_TMP/restart.err" | grep -oE '[0-9]+$' | head -n 1)
	[[ -n $resumed ]] || cr_fail "restart succeeded without saying where it resumed"
	((resumed < newest)) || cr_fail "restart resumed from checkpoint $resumed despite $lose damaged images of $newest"
	cr_expect_same restart
	cr_pass "$scheme (tolerates $tolerance): ranks ${lost_ranks[*]} of checkpoint $newest damaged ($damage), resumed from $resumed, same output"
fi

if ((lose > tolerance)); then
	# Beyond tolerance everywhere: a clear stop, nothing deleted.
	cr_expect_failure restart
	expect_set_line restart "the error (not a warning) names the set, the lost ranks and the tolerance" ': warning: '
	if grep -qE 'resumed from checkpoint' "$CR_TMP/restart.err"; then
		cr_show restart
		cr_fail "restart claims to have resumed"
	fi
	[[ ! -s $CR_TMP/restart.out ]] || cr_fail "restart beyond tolerance ran the program: $(cat "$CR_TMP/restart.out")"
	cr_expect_unchanged "$before" "$root"
	cr_pass "$scheme (tolerates $tolerance): ranks ${lost_ranks[*]} lost ($damage), restart stopped with a clear error, no file touched"
fi

cr_expect_status restart 0
cr_expect_line restart 'stasis(\[[0-9]+\])?: .*rebuilt lost or damaged images' "warning that images were rebuilt"
cr_expect_line restart "resumed from checkpoint $newest\\b" "restart resumed from the newest complete checkpoint ($newest)"
cr_expect_same restart
if [[ $damage == delete ]]; then
	for n in "${victims[@]}"; do
		[[ -n $(find "$root/node$n" -name "ckpt-*.img" 2>/dev/null) ]] ||
			cr_fail "simulated node $n has no image after the restart"
	done
fi
cr_pass "$scheme (tolerates $tolerance): ranks ${lost_ranks[*]} lost ($damage), rebuilt, resumed from $newest, same output"
