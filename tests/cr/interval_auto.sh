#!/bin/bash
# interval_auto.sh: STASIS_INTERVAL=auto with the two-level model, end to
# end. The MTBFs are small so that the period is short enough for a test.
#   - Each change of period is logged at STASIS_VERBOSE=1 with its inputs,
#     and the period logged is formula 2 of those inputs (recomputed here);
#     C is the measured mean blocking time of the checkpoints.
#   - A restart records its time in the job directory (restart-times:
#     light without a rebuild), and the restarted job's period uses it as
#     R1, "measured"; its output equals the uninterrupted run's.
#   - A bad STASIS_MTBF_LIGHT, and STASIS_MTBF with the two-level pair,
#     stop the job with one line.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
export STASIS_INTERVAL=auto STASIS_MTBF_LIGHT=20 STASIS_MTBF_HEAVY=200
cr_app heat

STASIS_MTBF_LIGHT=soon cr_run_wait bad1
cr_expect_failure bad1
cr_expect_words bad1 "a bad STASIS_MTBF_LIGHT" stasis STASIS_MTBF_LIGHT "'soon'" seconds
STASIS_MTBF=3600 cr_run_wait bad2
cr_expect_failure bad2
cr_expect_words bad2 "STASIS_MTBF with the two-level pair" stasis STASIS_MTBF "'3600'" STASIS_MTBF_LIGHT

# check_periods NAME: every "period" line of the job is formula 2 of its
# own inputs (to 0.1%, the printed precision), or the 1 s floor.
check_periods() {
	local name=$1
	python3 - "$CR_TMP/$name.err" <<'EOF' || cr_fail "a logged period is not formula 2 of its inputs"
import math, re, sys
n = 0
for line in open(sys.argv[1]):
    m = re.search(r"interval: period ([0-9.e+-]+) s \(two-level: C ([0-9.e+-]+) s .*R1 ([0-9.e+-]+) s "
                  r"\((measured|estimated)\), R2 ([0-9.e+-]+) s \((measured|estimated)\), "
                  r"MTBF light ([0-9.e+-]+) s, heavy ([0-9.e+-]+) s", line)
    if not m:
        continue
    t, c, r1, _, r2, _, mu1, mu2 = (float(x) if i not in (3, 5) else x for i, x in enumerate(m.groups()))
    l1, l2 = 1 / mu1, 1 / mu2
    under = 2 * c * (1 / (l1 + l2) - (l1 * r1 + l2 * r2) / (l1 + l2))
    want = max(math.sqrt(under), 1.0) if under > 0 else 1.0
    assert abs(t - want) <= 1e-3 * want + 1e-6, (line, want)
    n += 1
assert n >= 1, "no period line"
print(n, "period line(s) agree with formula 2")
EOF
}

cr_reference
cr_run run
cr_wait_line run 'interval: period .* \(two-level: C '
cr_wait_commits run 2
cr_kill run
check_periods run
cr_expect_line run 'R1 [0-9.e+-]+ s \(estimated\)' "R1 estimated before any restart"
record=$(find "$CR_TMP/ckpt" -name restart-times)
[[ -z $record ]] || cr_fail "a restart record exists before any restart: $record"

cr_restart restart
cr_expect_status restart 0
cr_expect_same restart
record=$(find "$CR_TMP/ckpt" -name restart-times)
[[ -n $record ]] || cr_fail "the restart left no restart-times in the job directory"
grep -qE '^[0-9]+ light [0-9]+\.[0-9]+$' "$record" || cr_fail "restart-times: $(cat "$record")"
r1=$(awk '{ print $3 }' "$record")
cr_ok "restart recorded in $record: $(cat "$record")"
if grep -q 'interval: period' "$CR_TMP/restart.err"; then
	check_periods restart
	cr_expect_line restart "R1 [0-9.e+-]+ s \\(measured\\)" "the restarted job's period uses the measured R1 ($r1 s)"
else
	cr_say "note: the restarted job committed no checkpoint, so logged no period"
fi
cr_pass "auto interval: periods are formula 2 of the logged inputs, restart time recorded and used"
