#!/bin/bash
# Fenix on stasis, in the zdtm manner: the project's Fenix programs under
# real mpirun, compared with an uninterrupted run. Cases:
#   errors        fx_errors (FENIX.md 5.6 and the spec's 3.5 example), np 4
#   ring SCHEME   fx_ring: a rank SIGKILLs itself after step 4, its node
#                 directory is deleted, a byte of another rank's newest
#                 snapshot is spoilt (not with xor, which survives one
#                 loss), the job is launched again
#                 (STASIS_FENIX_EPOCH=1) and restores through SCHEME; the
#                 checksums equal the uninterrupted run's
#   kill-random   a rank SIGKILLed from outside at a random moment (mostly
#                 inside store or commit_barrier of 4 MiB per rank); the
#                 relaunch restores a consistent snapshot and ends equal
#   lost-two SCHEME  two node directories of one set deleted: xor refuses
#                 with one line naming the set and its tolerance, and no
#                 file of the others is deleted; rs (k 2) rebuilds both
#   relaunch-kill   stasis-run --fenix --restarts 2, np 5 with 1 spare: world
#                 rank 1 SIGKILLed from outside at a random commit; one
#                 relaunch, the spare takes rank 1 (RECOVERED, the others
#                 SURVIVOR, fail list [1]); checksums equal the
#                 uninterrupted run's
#   relaunch-lost   the same failure with the dead rank's directory deleted
#                 before the relaunch: the spare's data is rebuilt through
#                 the partner copies; the relaunched ranks restore into
#                 the members the relaunch recreated (no member_create)
#   relaunch-chain  np 6 with 2 spares, stasis-run --fenix --restarts 3: an
#                 active rank dies, then a spare (SIGKILL from outside),
#                 then another active rank: spares used highest first,
#                 then the communicator shrinks with
#                 FENIX_WARNING_SPARE_RANKS_DEPLETED on every rank
#   encode-fails  fx_ring on two xor sets of 2 (FX_SET_SIZE=2), the
#                 redundancy encode failing on rank 3 only (STASIS_FAULT
#                 fail-encode-run, at the store of step 3, then at the
#                 wait of step 4's istore): every rank's call returns the
#                 same error, though only rank 3's set failed, and one line
#                 says why; no rank hangs
#   checkpointed  fx_ring under stasis-run (transparent checkpoints every
#                 second, the Data API on the program's communicators),
#                 the whole job SIGKILLed after its second checkpoint and
#                 resumed by stasis-restart: checksums equal the
#                 uninterrupted run's
# Exit 0 pass, 1 fail.
set -euo pipefail
B=${STASIS_BUILD:?}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d /dev/shm/stasis-fenix.XXXXXX)
chmod 700 "$T"
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; for f in "$T"/*.out; do echo "== $f"; tail -20 "$f"; done; exit 1; }
run() { # run DIR NAME [env...] -- args: mpirun -np 4, output to $T/NAME.out
	local dir=$1 name=$2
	shift 2
	local envs=()
	while [ "$1" != -- ]; do envs+=(-x "$1"); shift; done
	shift
	timeout -k 5 90 mpirun --oversubscribe -np 4 -x STASIS_DIR="$T/$dir/%r" -x STASIS_JOB=fx \
		"${envs[@]}" "$@" >"$T/$name.out" 2>&1
}
sums() { grep checksum "$T/$1.out" | sort; }
run5() { # as run, on 5 processes
	local dir=$1 name=$2
	shift 2
	local envs=()
	while [ "$1" != -- ]; do envs+=(-x "$1"); shift; done
	shift
	# As stasis-run --fenix does: a survivor's SIGTERM handler (its
	# "survived" marker) gets 3 s before Open MPI's SIGKILL, not 1 s,
	# which a loaded machine missed (a survivor counted as failed).
	timeout -k 5 90 mpirun --oversubscribe -np 5 --mca odls_base_sigkill_timeout 3 \
		-x STASIS_DIR="$T/$dir/%r" -x STASIS_JOB=fx "${envs[@]}" "$@" >"$T/$name.out" 2>&1
}
expect() { grep -qx -- "$2" "$T/$1.out" || fail "no line '$2' in $1"; }
relaunched() { # N OUT: exactly N Fenix relaunches by stasis-run
	[ "$(grep -c 'stasis-run: the job failed .*: Fenix relaunch' "$T/$2.out")" = "$1" ] ||
		fail "expected $1 relaunch(es): $(grep -c 'Fenix relaunch' "$T/$2.out")"
}

# stasis-inspect on fx_ring's files (STASIS_DIR=$T/DIR/%r): it lists the
# snapshots and members the program said it stored, --verify passes; then a
# byte of one .dat is flipped: --verify fails naming that file, and says
# the set can rebuild it (every scheme here tolerates one loss).
# json_check SCHEME "TS..." DAMAGED < stasis-inspect --verify --json: one
# Fenix group 7 of 4 slots with policy SCHEME and the complete snapshots
# TS; DAMAGED 0: every slot file ok and "ok" true; 1: the newest
# snapshot's slot 1 DAMAGED, its set lost slot 1 and can be rebuilt.
json_check() {
	/usr/bin/python3 -c '
import json, sys
scheme, ts, damaged = sys.argv[1], [int(t) for t in sys.argv[2].split()], sys.argv[3] == "1"
d = json.load(sys.stdin)
gs = [g for j in d["jobs"] for g in j["fenix_groups"]]
assert len(gs) == 1 and gs[0]["group"] == 7 and gs[0]["slots"] == 4, gs
assert gs[0]["policy"] == scheme, gs[0]["policy"]
snaps = [s for s in gs[0]["snapshots"] if s["complete"]]
assert [s["ts"] for s in snaps] == ts, (snaps, ts)
last = snaps[-1]
bad = [s["slot"] for s in last["slots"] if s["dat"] != "ok"]
assert d["ok"] == (not damaged), d["ok"]
if damaged:
	assert bad == [1] and last["slots"][1]["error"], last["slots"]
	assert [(x["lost"], x["rebuildable"]) for x in last["lost_sets"]] == [([1], True)], last
else:
	assert not bad and not last["lost_sets"], last
' "$@"
}

inspect_ring() { # DIR SCHEME
	local I="$B/tools/stasis-inspect" out=$T/inspect.out
	"$I" "$T/$1" >"$out" 2>&1 || fail "stasis-inspect exit $?: $(cat "$out")"
	grep -q "^  fenix group 7: 4 slot(s), policy $2, " "$out" || fail "group line: $(cat "$out")"
	local ts mem
	ts=$(sed -n 's/^    ts \([0-9]*\): .*; complete$/\1/p' "$out" | xargs)
	mem=$(sed -n 's/^    ts [0-9]*: members \([^;]*\); .*/\1/p' "$out" | tail -1)
	expect ref "stored group 7 ts $ts members $mem"
	"$I" --verify "$T/$1" >"$out" 2>&1 || fail "verify of an intact run: $(cat "$out")"
	[ "$(grep -c '^      slot .: dat ok, red ok, done ok$' "$out")" = 8 ] || fail "verify: $(cat "$out")"
	# The same in --json: group 7, its policy, the same snapshots, every
	# slot file ok.
	"$I" --verify --json "$T/$1" >"$T/inspect.json" 2>"$out" || fail "verify --json: $(cat "$out")"
	json_check "$2" "$ts" 0 <"$T/inspect.json" || fail "--json: $(cat "$T/inspect.json")"
	local f
	f=$(ls "$T"/$1/1/fx/fenix/g7-t*.c1.dat | sort -V | tail -1)
	printf '\xff' | dd of="$f" bs=1 seek=300 conv=notrunc status=none
	"$I" --verify "$T/$1" >"$out" 2>&1 && fail "verify passed a flipped byte"
	grep -q "^stasis-inspect: .* slot 1: $f damaged: section .* crc64 mismatch$" "$out" ||
		fail "the damaged file not named: $(cat "$out")"
	grep -q "^      set .*: lost 1; scheme $2 tolerates .: can be rebuilt$" "$out" ||
		fail "no rebuild verdict: $(cat "$out")"
	"$I" --verify --json "$T/$1" >"$T/inspect.json" 2>/dev/null && fail "verify --json passed a flipped byte"
	json_check "$2" "$ts" 1 <"$T/inspect.json" || fail "--json, damaged: $(cat "$T/inspect.json")"
	echo "ok: stasis-inspect lists ts $ts members $mem; verify passes, then names $(basename "$f")"
}

case $1 in
errors)
	run e errors -- "$B/tests/fenix/fx_errors" || fail "fx_errors exit $?"
	grep -q '^ALL OK$' "$T/errors.out" || fail "fx_errors"
	grep -c '^ok:' "$T/errors.out"
	;;
ring)
	s=$2 args=(8 3000 1 4 "$2")
	run ref ref -- "$B/tests/fenix/fx_ring" 8 3000 -1 0 "$2" || fail "reference run"
	inspect_ring ref "$s"
	rc=0
	run k k1 -- "$B/tests/fenix/fx_ring" "${args[@]}" || rc=$?
	[ $rc -ne 0 ] || fail "the first launch was not killed"
	[ -d "$T/k/1/fx/fenix" ] || fail "no files of rank 1"
	rm -rf "$T/k/1"
	# and, where the scheme survives two losses in the set (partner: each
	# copy is elsewhere; rs k 2), one byte of rank 2's newest snapshot
	# spoilt: its crc64 catches it, and it is rebuilt too
	if [ "$s" != xor ]; then
		f=$(ls "$T"/k/2/fx/fenix/g7-t*.c2.dat | sort -V | tail -1)
		printf '\xff' | dd of="$f" bs=1 seek=200 conv=notrunc status=none
	fi
	run k k2 STASIS_FENIX_EPOCH=1 -- "$B/tests/fenix/fx_ring" "${args[@]}" || fail "relaunch"
	grep -q "rank 1 restored step 4 (0 0)" "$T/k2.out" || fail "rank 1 did not restore step 4"
	[ "$(sums ref)" = "$(sums k2)" ] || fail "checksums differ from the uninterrupted run"
	[ "$(stat -c %a "$T/k/1/fx/fenix")" = 700 ] || fail "rebuilt directory mode"
	for f in "$T"/k/*/fx/fenix/*; do
		[ "$(stat -c %a "$f")" = 600 ] || fail "$f: mode $(stat -c %a "$f")"
	done
	echo "ok: $s: rebuilt, restored, same checksums as the uninterrupted run"
	;;
kill-random)
	args=(40 524288 -1 0 xor)
	run ref ref -- "$B/tests/fenix/fx_ring" "${args[@]}" || fail "reference run"
	mkdir -m 700 "$T/pids"
	setsid timeout -k 5 90 mpirun --oversubscribe -np 4 -x STASIS_DIR="$T/k/%r" -x STASIS_JOB=fx \
		-x FX_PID_DIR="$T/pids" "$B/tests/fenix/fx_ring" "${args[@]}" >"$T/k1.out" 2>&1 &
	job=$!
	# After a random commit (2..30), a random 0-99 ms on: mostly inside
	# the store or the commit_barrier of the next step.
	k=$((2 + RANDOM % 29))
	for _ in $(seq 600); do grep -q "^committed $k\$" "$T/k1.out" 2>/dev/null && break; sleep 0.02; done
	grep -q "^committed $k\$" "$T/k1.out" || { kill -9 -- -$job 2>/dev/null; fail "no commit $k"; }
	sleep "0.0$((RANDOM % 10))"
	victim=$((RANDOM % 4))
	kill -9 "$(cat "$T/pids/pid.$victim")" || true
	wait $job || true
	last=$(grep -c '^committed' "$T/k1.out")
	grep -q checksum "$T/k1.out" && fail "the kill came after the end; rerun"
	run k k2 STASIS_FENIX_EPOCH=1 -- "$B/tests/fenix/fx_ring" "${args[@]}" || fail "relaunch"
	[ "$(sums ref)" = "$(sums k2)" ] || fail "checksums differ from the uninterrupted run"
	echo "ok: rank $victim killed after $last commits; restored $(grep -m1 restored "$T/k2.out")"
	;;
lost-two)
	args=(8 3000 1 4 "$2")
	run ref ref -- "$B/tests/fenix/fx_ring" 8 3000 -1 0 "$2" || fail "reference run"
	run k k1 -- "$B/tests/fenix/fx_ring" "${args[@]}" || true
	rm -rf "$T/k/1" "$T/k/2"
	# Every file of the intact ranks, with its digest: each must be there
	# unchanged after the refusal (the relaunch may add its own epoch
	# record and survivor markers, which depend on how mpirun ended it).
	digests() { (cd "$T/k" && find 0 3 -type f ! -name 'epoch*' ! -name 'survived.*' -exec md5sum {} + | sort); }
	before=$(digests)
	rc=0
	run k k2 STASIS_FENIX_EPOCH=1 -- "$B/tests/fenix/fx_ring" "${args[@]}" || rc=$?
	if [ "$2" = xor ]; then
		[ $rc -ne 0 ] || fail "two lost of an xor set: restored?"
		n=$(grep -c 'stasis fenix: restore of group 7: set .*tolerates 1' "$T/k2.out" || true)
		[ "$n" = 1 ] || fail "expected one line naming the tolerance, got $n"
		grep 'stasis fenix:' "$T/k2.out"
		after=$(digests)
		[ "$before" = "$after" ] || fail "files of the intact ranks changed: $(diff <(echo "$before") <(echo "$after"))"
		echo "ok: xor refused two lost members in one line, nothing deleted"
	else
		[ $rc -eq 0 ] || fail "rs k=2 did not survive two lost members"
		[ "$(sums ref)" = "$(sums k2)" ] || fail "checksums differ"
		echo "ok: rs rebuilt two lost members, same checksums"
	fi
	;;
shrink)
	# Stored by 4 ranks, read by 3: restore refused on every rank with the
	# same code, restore_from_rank gives ranks 0-2 their data bit for bit.
	run ref ref -- "$B/tests/fenix/fx_ring" 8 3000 -1 0 xor || fail "reference run"
	timeout -k 5 90 mpirun --oversubscribe -np 3 -x STASIS_DIR="$T/ref/%r" -x STASIS_JOB=fx \
		-x STASIS_FENIX_EPOCH=1 -x FX_SHRUNK=1 "$B/tests/fenix/fx_ring" 8 3000 -1 0 xor \
		>"$T/s.out" 2>&1 || fail "shrunk relaunch"
	[ "$(grep -c 'shrunk: restore -14, restore_from_rank 0$' "$T/s.out")" = 3 ] ||
		fail "restore not refused / restore_from_rank failed"
	[ "$(grep -c 'stored by 4 ranks, restored by 3' "$T/s.out")" = 1 ] || fail "no one-line refusal"
	[ "$(sums ref | grep -v 'rank 3 ')" = "$(sums s)" ] || fail "restore_from_rank data differ"
	echo "ok: restore refused after a shrink, restore_from_rank bit for bit"
	;;
checkpointed)
	args=(2000 4000 -1 0 xor)
	run ref ref -- "$B/tests/fenix/fx_ring" "${args[@]}" || fail "reference run"
	STASIS_DIR="$T/s/%r" STASIS_JOB=fx STASIS_INTERVAL=1 STASIS_VERBOSE=1 setsid \
		timeout -k 5 90 "$B/tools/stasis-run" mpirun --oversubscribe -np 4 \
		"$B/tests/fenix/fx_ring" "${args[@]}" >"$T/s1.out" 2>&1 &
	job=$!
	for _ in $(seq 1500); do
		[ "$(grep -c 'checkpoint .* committed' "$T/s1.out" 2>/dev/null)" -ge 2 ] && break
		sleep 0.02
	done
	# Open MPI gives every rank a process group of its own: the session
	# (setsid) holds them all. bash's "Killed" report stays out of the log.
	exec {err}>&2 2>/dev/null
	for _ in $(seq 100); do
		pkill -9 -s "$job" || break
		sleep 0.1
	done
	wait $job || true
	exec 2>&"$err" {err}>&-
	[ "$(grep -c 'checkpoint .* committed' "$T/s1.out")" -ge 2 ] || fail "no second checkpoint"
	! grep -q checksum "$T/s1.out" || fail "the job ended before it was killed"
	STASIS_DIR="$T/s/%r" STASIS_JOB=fx timeout -k 5 90 "$B/tools/stasis-restart" mpirun \
		--oversubscribe -np 4 "$B/tests/fenix/fx_ring" "${args[@]}" >"$T/s2.out" 2>&1 ||
		fail "stasis-restart exit $?"
	[ "$(sums ref)" = "$(sums s2)" ] || fail "checksums differ from the uninterrupted run's"
	echo "ok: a Fenix ring under stasis-run, killed after two checkpoints, resumed equal"
	;;
installed)
	# meson install gives libfenix.so.1 (Fenix_* only), fenix.h and fenix.pc,
	# and a Fenix program builds with pkg-config from the staged tree.
	meson install -C "$B" --destdir "$T/stage" --no-rebuild --quiet >"$T/install.out" 2>&1 ||
		fail "meson install"
	lib=$(find "$T/stage" -name libfenix.so.1 | head -1)
	pc=$(find "$T/stage" -name fenix.pc | head -1)
	hdr=$(find "$T/stage" -name fenix.h | head -1)
	[ -n "$lib" ] && [ -n "$pc" ] && [ -n "$hdr" ] || fail "installed: lib '$lib' pc '$pc' header '$hdr'"
	objdump -p "$lib" | grep -q 'SONAME *libfenix.so.1$' || fail "SONAME"
	other=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^Fenix_\|^FENIX_' || true)
	[ -z "$other" ] || fail "libfenix.so exports more than Fenix_*: $other"
	prefix=$(sed -n 's/^prefix=//p' "$pc")
	export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$T/stage
	flags=$(pkg-config --cflags --libs fenix) || fail "pkg-config fenix"
	mpicc "$(dirname "$0")/fx_errors.c" $flags -o "$T/fx_errors" >"$T/cc.out" 2>&1 ||
		fail "building against the installed fenix.h: $(head -3 "$T/cc.out")"
	echo "ok: installed $lib, $hdr, $pc (prefix $prefix); a Fenix program builds with pkg-config"
	;;
relaunch-kill)
	args=(20 65536 1 -)
	run5 ref ref -- "$B/tests/fenix/fx_relaunch" "${args[@]}" || fail "reference run"
	mkdir -m 700 "$T/pids"
	STASIS_DIR="$T/k/%r" STASIS_JOB=fx FX_PID_DIR="$T/pids" setsid timeout -k 5 120 \
		"$B/tools/stasis-run" --fenix --restarts 2 mpirun --oversubscribe -np 5 \
		"$B/tests/fenix/fx_relaunch" "${args[@]}" >"$T/k.out" 2>&1 &
	job=$!
	k=$((2 + RANDOM % 12))
	for _ in $(seq 900); do grep -q "^committed 0 $k\$" "$T/k.out" 2>/dev/null && break; sleep 0.02; done
	grep -q "^committed 0 $k\$" "$T/k.out" || { kill -9 -- -$job 2>/dev/null; fail "no commit $k"; }
	sleep "0.0$((RANDOM % 10))"
	kill -9 "$(cat "$T/pids/pid.0.1")" || true
	wait $job || fail "stasis-run --fenix exit $?"
	relaunched 1 k
	expect k "launch 1 world 4 rank 1/4 role 1 error 0 fails \[1\] roles 0/1/3 rank0 2"
	for w in 0 2 3; do
		expect k "launch 1 world $w rank $w/4 role 2 error 0 fails \[1\] roles 0/1/3 rank0 2"
	done
	[ "$(sums ref)" = "$(sums k)" ] || fail "checksums differ from the uninterrupted run"
	echo "ok: world rank 1 killed after commit $k; spare 4 took rank 1; same checksums"
	;;
relaunch-lost)
	run5 ref ref -- "$B/tests/fenix/fx_relaunch" 8 3000 1 - || fail "reference run"
	rc=0
	run5 k k1 -- "$B/tests/fenix/fx_relaunch" 8 3000 1 1:0:4 implicit || rc=$?
	[ $rc -ne 0 ] || fail "the first launch was not killed"
	[ -d "$T/k/1/fx/fenix" ] || fail "no files of world rank 1"
	rm -rf "$T/k/1"
	run5 k k2 STASIS_FENIX_EPOCH=1 -- "$B/tests/fenix/fx_relaunch" 8 3000 1 1:0:4 implicit ||
		fail "relaunch"
	expect k2 "launch 1 world 4 rank 1/4 role 1 error 0 fails \[1\] roles 0/1/3 rank0 2"
	expect k2 "launch 1 rank 1 restore 0 0 step 4"
	[ "$(grep -c '^launch 1 rank . implicit members: buffers 1 1, count 3000$' "$T/k2.out")" = 4 ] ||
		fail "members not recreated by the relaunch"
	[ "$(sums ref)" = "$(sums k2)" ] || fail "checksums differ from the uninterrupted run"
	[ "$(stat -c %a "$T/k/4/fx/fenix")" = 700 ] || fail "spare's directory mode"
	for f in "$T"/k/*/fx/fenix/*; do
		[ "$(stat -c %a "$f")" = 600 ] || fail "$f: mode $(stat -c %a "$f")"
	done
	ls "$T"/k/4/fx/fenix/g5-t*.c1.done >/dev/null || fail "slot 1 not carried on by the spare"
	echo "ok: the dead rank's directory lost; the spare's data rebuilt from the partner; same checksums"
	;;
relaunch-chain)
	# launch 0: world 1 dies (self, step 3): spare 5 takes rank 1
	# launch 1: spare 4 is SIGKILLed from outside (once launch 1 runs): no
	#           rank moves (the active ranks may be done by the time
	#           mpirun ends the job: then they wait in Fenix_Finalize)
	# launch 2: world 2 dies (self) after its restore: no spare left,
	#           shrink to 3
	mkdir -m 700 "$T/pids"
	STASIS_DIR="$T/c/%r" STASIS_JOB=fx FX_PID_DIR="$T/pids" setsid timeout -k 5 150 \
		"$B/tools/stasis-run" --fenix --restarts 3 mpirun --oversubscribe -np 6 \
		"$B/tests/fenix/fx_relaunch" 12 3000 2 1:0:3,2:2:-1 >"$T/c.out" 2>&1 &
	job=$!
	for _ in $(seq 1500); do grep -q "^launch 1 world 5 " "$T/c.out" 2>/dev/null && break; sleep 0.02; done
	grep -q "^launch 1 world 5 " "$T/c.out" || { kill -9 -- -$job 2>/dev/null; fail "launch 1 did not start"; }
	kill -9 "$(cat "$T/pids/pid.1.4")" || true
	wait $job || fail "stasis-run --fenix exit $?"
	relaunched 3 c
	expect c "launch 1 world 5 rank 1/4 role 1 error 0 fails \[1\] roles 0/1/3 rank0 2"
	expect c "launch 1 world 2 rank 2/4 role 2 error 0 fails \[1\] roles 0/1/3 rank0 2"
	expect c "launch 2 world 5 rank 1/4 role 2 error 0 fails \[4\] roles 0/0/4 rank0 2"
	expect c "launch 2 world 3 rank 3/4 role 2 error 0 fails \[4\] roles 0/0/4 rank0 2"
	for l in "world 0 rank 0/3" "world 5 rank 1/3" "world 3 rank 2/3"; do
		expect c "launch 3 $l role 2 error 100 fails \[2\] roles 0/0/3 rank0 2"
	done
	[ "$(grep -c '^launch 3 rank . restore -14 -14 step' "$T/c.out")" = 3 ] ||
		fail "restore after the shrink not refused on every rank"
	[ "$(grep -c '^rank . of 3 steps 12 checksum' "$T/c.out")" = 3 ] || fail "no end on 3 ranks"
	echo "ok: spare 5 took rank 1, spare 4's death moved nothing, then the shrink to 3 with the warning on every rank"
	;;
encode-fails)
	# Snapshot timestamps start at 0: step S stores ts S-1, fault id S.
	for c in "store 3 store" "wait 4 istore"; do
		read -r call step said <<<"$c"
		run "e$step" "e$step" FX_SET_SIZE=2 STASIS_FAULT="fail-encode-run:$step@3" -- \
			"$B/tests/fenix/fx_ring" 8 2000 -1 0 xor && fail "$call: the job did not fail"
		codes=$(sed -n "s/^rank [0-3] step $step: $call returned \(-[0-9]*\)$/\1/p" "$T/e$step.out" |
			sort | uniq -c)
		[ "$(wc -l <<<"$codes")" = 1 ] && [[ $codes =~ ^\ *4\ -[0-9]+$ ]] ||
			fail "$call of step $step: not the same error on all 4 ranks: $codes"
		[ "$(grep -c "^stasis fenix: $said of group 7: .*encod" "$T/e$step.out")" = 1 ] ||
			fail "$call of step $step: not one line saying why"
		grep -q "rank . step [0-9]*: .* returned" "$T/e$step.out" || fail "no rank reported"
	done
	echo "ok: a store and an istore whose encode failed in one set returned the same error on every rank, said once"
	;;
*) fail "unknown case $1" ;;
esac
