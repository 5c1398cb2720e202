#!/bin/bash
# inspect.sh: stasis-inspect on real checkpoints of heat, 4 ranks on 2
# simulated nodes (xor sets of 2: set 0 = ranks 0,2, set 1 = ranks 1,3),
# with a flush level.
#   - listing (text and JSON, parsed) agrees with the files on disk;
#   - --verify of intact checkpoints: status 0, and the restart it predicts;
#   - --where names, for every rank, a line of heat.c that calls MPI (a
#     checkpoint stops each rank at its own MPI call);
#   - a flipped byte: status 1, the file and rank named, "can be rebuilt";
#     plus a deleted node directory: the set with two losses "CANNOT be
#     rebuilt", the restart predicted from the older checkpoint or the
#     flush level -- and a real stasis-restart agrees;
#   - nothing is written by any of it;
#   - a directory that is not stasis's, one owned by another user, a
#     missing one, bad options: one line each and status 1 or 2.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export CR_NP=4
cr_setup
inspect=$STASIS_BUILD/tools/stasis-inspect
[[ -x $inspect ]] || cr_skip "$inspect is missing"
root=$CR_TMP/ckpt
shared=$CR_TMP/shared
export STASIS_DIR=$root/node%n STASIS_FAILURE_DOMAIN=2 STASIS_SCHEME=xor STASIS_SET_SIZE=2
export STASIS_FLUSH_DIR=$shared STASIS_FLUSH_EVERY=2
cr_app heat
job=$(basename "$CR_APP")
cr_reference
cr_run prep
cr_wait_commits prep 4
cr_kill prep
export CR_SNAPSHOT_SKIP='lock.r*'
before=$CR_TMP/before
# Both levels: stasis-inspect writes nothing into either.
snapshot() {
	cr_snapshot "$before.root" "$root"
	cr_snapshot "$before.shared" "$shared"
}
unchanged() {
	cr_expect_unchanged "$before.root" "$root"
	cr_expect_unchanged "$before.shared" "$shared"
}
snapshot

# run NAME ARGS...: stasis-inspect, stdout/stderr to NAME.out/.err, status
# in ST.
run() {
	local name=$1
	shift
	ST=0
	"$inspect" "$@" >"$CR_TMP/$name.out" 2>"$CR_TMP/$name.err" || ST=$?
}
expect() {
	local name=$1 want=$2
	if [[ $ST != "$want" ]]; then
		cr_show "$name"
		cr_fail "stasis-inspect ($name) exited $ST, $want expected"
	fi
}

# --- listing ----------------------------------------------------------------
run list "$root" "$shared"
expect list 0
ids=$(find "$root" -name 'ckpt-*.r0.done' -printf '%f\n' | sed -E 's/ckpt-([0-9]+).*/\1/' | sort -n | tr '\n' ' ')
for id in $ids; do
	grep -qE "^ +$id +[0-9-]+ [0-9:]+ +(full|incremental) .* complete$" "$CR_TMP/list.out" ||
		cr_fail "listing has no complete line for checkpoint $id: $(cat "$CR_TMP/list.out")"
done
grep -q "^job $job (node-local level, 4 ranks, scheme xor, sets of 2, tolerates 1)" "$CR_TMP/list.out" ||
	cr_fail "listing does not describe the job: $(head -n 1 "$CR_TMP/list.out")"
grep -q "^job $job (flush level, 4 ranks" "$CR_TMP/list.out" || cr_fail "the flush level is not listed"
cr_ok "listing: checkpoints $ids complete, scheme xor, flush level"

# --- JSON, parsed -----------------------------------------------------------
run json --json --verify "$root" "$shared"
expect json 0
CR_IDS=$ids CR_ROOT=$root python3 - "$CR_TMP/json.out" <<'EOF' || cr_fail "the JSON does not match the files"
import json, os, sys
doc = json.load(open(sys.argv[1]))
assert doc["ok"] is True, doc["ok"]
local = [j for j in doc["jobs"] if j["level"] == "local"]
flush = [j for j in doc["jobs"] if j["level"] == "flush"]
assert len(local) == 1 and len(flush) == 1, [j["level"] for j in doc["jobs"]]
job = local[0]
assert job["ranks"] == 4 and job["scheme"] == "xor" and job["set_size"] == 2, job
want = [int(i) for i in os.environ["CR_IDS"].split()]
got = [c["id"] for c in job["checkpoints"] if c["complete"]]
assert got == want, (got, want)
for c in job["checkpoints"]:
    assert c["chain"][0] == c["id"], c
    assert (c["kind"] == "full") == (c["parent"] is None), c
    if c["parent"] is not None:
        assert c["chain"][1] == c["parent"], c
    sizes = [os.path.getsize(os.path.join(d, "ckpt-%d.r%d.img" % (c["id"], r)))
             for r in range(4) for d in job["directories"]
             if os.path.exists(os.path.join(d, "ckpt-%d.r%d.img" % (c["id"], r)))]
    # A checkpoint being written at the kill: listed, not verified.
    assert c["complete"] == ("verify" in c), c
    if not c["complete"]:
        continue
    assert c["bytes_per_rank"] == sizes and c["bytes_total"] == sum(sizes), (c, sizes)
    assert c["verify"]["restorable"] and all(r["image"] == "ok" for r in c["verify"]["ranks"]), c
    assert sorted(sorted(s["ranks"]) for s in c["verify"]["sets"]) == [[0, 2], [1, 3]], c
assert job["restart_from"] == want[-1], job["restart_from"]
print("json ok: checkpoints", got, "restart from", job["restart_from"])
EOF
cr_ok "JSON parsed: ids, chains, sizes, sets and the predicted restart match the files"

# --- where ------------------------------------------------------------------
run where --where --job "$job" "$root"
expect where 0
python3 - "$CR_TMP/where.out" "$(dirname "$0")/../apps/heat.c" <<'EOF' ||
import re, sys
out = open(sys.argv[1]).read()
mpi_lines = {i + 1 for i, l in enumerate(open(sys.argv[2])) if "MPI_" in l}
ranks = set()
for head, frame in re.findall(r"^  ranks? ([0-9,-]+):\n    #0 +(.*)$", out, re.M):
    for part in head.split(","):
        a, _, b = part.partition("-")
        ranks |= set(range(int(a), int(b or a) + 1))
    m = re.match(r"\w+ at .*heat\.c:(\d+) ", frame)
    assert m and int(m.group(1)) in mpi_lines, "not at an MPI call of heat.c: " + frame
assert ranks == {0, 1, 2, 3}, "ranks listed: %s" % sorted(ranks)
EOF
	cr_fail "--where: $(cat "$CR_TMP/where.out")"
cr_ok "--where: $(grep -m 1 '#0' "$CR_TMP/where.out")"
unchanged

# --- damage -----------------------------------------------------------------
newest=$(STASIS_DIR=$root cr_newest_complete)
cr_flip_byte "$(STASIS_DIR=$root cr_ckpt_file "$newest" 1 img)"
run flip --verify "$root"
expect flip 1
grep -qE "checkpoint $newest .*rank 1: image damaged: .*ckpt-$newest\.r1\.img" "$CR_TMP/flip.err" ||
	cr_fail "the damaged image is not named: $(cat "$CR_TMP/flip.err")"
grep -qE "checkpoint $newest: set [0-9]+ \(ranks 1,3\): lost 1; scheme xor tolerates 1: can be rebuilt" "$CR_TMP/flip.out" ||
	cr_fail "no rebuildable verdict for set 1: $(cat "$CR_TMP/flip.out")"
grep -q "a restart would resume from checkpoint $newest " "$CR_TMP/flip.out" || cr_fail "restart from $newest not predicted"
cr_ok "flipped byte: rank 1 named, set 1 can be rebuilt, restart still from $newest"

rm -rf "${root:?}/node1"
cr_ok "deleted simulated node 1 (ranks 2, 3)"
snapshot
run lost --verify "$root" "$shared"
expect lost 1
grep -qE "checkpoint $newest: set [0-9]+ \(ranks 1,3\): lost 1,3; scheme xor tolerates 1: CANNOT be rebuilt" "$CR_TMP/lost.out" ||
	cr_fail "no verdict that set 1 cannot be rebuilt: $(cat "$CR_TMP/lost.out")"
grep -qE "checkpoint $newest .*rank 3: image missing" "$CR_TMP/lost.err" || cr_fail "the lost rank 3 is not named"
predicted=$(grep -oE 'a restart would resume from checkpoint [0-9]+ \([a-z -]+\)' "$CR_TMP/lost.out" | head -n 1)
[[ -n $predicted ]] || cr_fail "no restart predicted: $(cat "$CR_TMP/lost.out")"
unchanged
cr_ok "node lost: set 1 cannot be rebuilt; $predicted; nothing written"
pid=$(grep -oE '[0-9]+ \(' <<<"$predicted" | grep -oE '[0-9]+')
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $pid\\b" "stasis-restart resumed where stasis-inspect said ($pid)"
cr_expect_same restart

# --- errors -----------------------------------------------------------------
mkdir -p "$CR_TMP/notstasis/a/b"
run plain "$CR_TMP/notstasis"
expect plain 1
cr_expect_line plain "^stasis-inspect: $CR_TMP/notstasis: not a stasis checkpoint directory" "not a stasis directory"
run missing "$CR_TMP/nowhere"
expect missing 1
cr_expect_line missing "^stasis-inspect: $CR_TMP/nowhere: No such file or directory" "missing directory"
cp -a "$shared" "$CR_TMP/other"
chown -R nobody "$CR_TMP/other"
run other "$CR_TMP/other/$job"
expect other 1
cr_expect_line other "^stasis-inspect: $CR_TMP/other/$job: owned by uid [0-9]+, not by you" "another user's directory"
[[ ! -s $CR_TMP/other.out ]] || cr_fail "another user's checkpoints were listed"
for bad in --bogus "--id abc" "--id 0"; do
	# shellcheck disable=SC2086
	run usage $bad "$root"
	expect usage 2
done
cr_ok "usage errors exit 2"
cr_pass "stasis-inspect: listing, JSON, --where, --verify with damage and node loss, errors"
