#!/bin/bash
# output.sh APP ARGS...: output a program wrote before a checkpoint must
# reach its destination, not sit in a buffer that a restart no longer has.
# APP prints progress lines as it goes (heat_f's EVERY argument: Fortran's
# unit 6, buffered by libgfortran when stdout is a pipe).
#
# Kill the job some time after its second commit (no commit pending at
# the kill, so everything flushed at the last one has been forwarded),
# restart, and require that
#  - the killed run's output is a prefix of the uninterrupted run's,
#  - the restart's output is a suffix of it, ending the same way,
#  - together they cover it: no line lost between the checkpoint and the
#    restart (lines written between the checkpoint and the kill appear in
#    both, as they must).
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

export STASIS_INTERVAL=1
cr_setup
cr_app "${1:?usage: output.sh APP ARGS...}" "${@:2}"
cr_reference 8
lines=$(wc -l <"$CR_TMP/ref.out")
((lines >= 20)) || cr_fail "the uninterrupted run printed $lines lines, too few to tell"

cr_run run
cr_wait_commits run 2
sleep 0.3
cr_kill run
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart 'resumed from checkpoint [0-9]+' "the restart resumed"

ref=$CR_TMP/ref.out
run_bytes=$(stat -c %s "$CR_TMP/run.out")
restart_bytes=$(stat -c %s "$CR_TMP/restart.out")
ref_bytes=$(stat -c %s "$ref")
cmp -s -n "$run_bytes" "$CR_TMP/run.out" "$ref" ||
	cr_fail "the killed run's output is not a prefix of the uninterrupted run's"
tail -c "$restart_bytes" "$ref" | cmp -s - "$CR_TMP/restart.out" ||
	cr_fail "the restart's output is not a suffix of the uninterrupted run's: $(head -n 2 "$CR_TMP/restart.out")"
if ((run_bytes + restart_bytes < ref_bytes)); then
	cr_say "killed run ends: $(tail -n 1 "$CR_TMP/run.out")"
	cr_say "restart begins: $(head -n 1 "$CR_TMP/restart.out")"
	cr_fail "$((ref_bytes - run_bytes - restart_bytes)) bytes of output written before the checkpoint were lost"
fi
cr_ok "killed run: $(wc -l <"$CR_TMP/run.out") lines, restart: $(wc -l <"$CR_TMP/restart.out") lines, of $lines: none lost"
cr_pass "$(basename "$CR_APP"): output written before the checkpoint survived the kill and the restart"
