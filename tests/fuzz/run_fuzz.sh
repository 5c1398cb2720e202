#!/bin/bash
# run_fuzz.sh FUZZER REGRESSION_DIR [RUNS]: a short, seeded libFuzzer run of
# one target: the seeds the target writes itself (valid files of stasis's
# own writers) plus the regression inputs of earlier crashes, then RUNS
# (default 20000) mutations from seed 1, at most 60 s. Fails on any crash,
# leak or sanitizer report; skips (77) when the fuzzer could not be built
# (no clang with libFuzzer here; CI installs it, see .ci/deps).
set -euo pipefail
fuzzer=${1:-}
regress=${2:?usage: run_fuzz.sh FUZZER REGRESSION_DIR [RUNS]}
runs=${3:-20000}
if [[ -z $fuzzer || ! -x $fuzzer ]]; then
	echo "SKIP: no fuzzer built (clang with -fsanitize=fuzzer not found at configure time)"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/stasis-fuzz-run.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/seeds" "$work/corpus"
STASIS_FUZZ_SEEDS=$work/seeds "$fuzzer"
echo "seeds: $(ls "$work/seeds" | tr '\n' ' ')regression inputs: $(ls "$regress" 2>/dev/null | wc -l)"
# Each regression input alone first, so that a failure names it.
for f in "$regress"/*; do
	[[ -f $f ]] || continue
	"$fuzzer" "$f" >"$work/one.log" 2>&1 || { cat "$work/one.log"; echo "FAIL: regression input $f"; exit 1; }
done
dirs=("$work/corpus" "$work/seeds")
[[ -d $regress ]] && dirs+=("$regress")
TMPDIR=$work "$fuzzer" -seed=1 -runs="$runs" -max_total_time=60 -max_len=65536 \
	-artifact_prefix="$work/" "${dirs[@]}" >"$work/fuzz.log" 2>&1 || {
	tail -n 40 "$work/fuzz.log"
	for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
		[[ -f $a ]] && echo "input: $(od -An -tx1 "$a" | head -n 4)"
	done
	echo "FAIL: the fuzzer found a crash"
	exit 1
}
grep -E '^#[0-9]+ +(INITED|DONE)' "$work/fuzz.log" || tail -n 3 "$work/fuzz.log"
echo "PASS"
