#!/bin/bash
# installed.sh: the tools work after `meson install`, not only from the
# build tree. Install into a staging directory (meson install --destdir),
# check that the installed scripts preload the installed library's path
# (and say so in --help), then do a whole round trip with the staged
# scripts and library (STASIS_LIB points into the staging directory, which
# stands for the prefix): kill after two checkpoints, restart, same output.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

cr_setup
stage=$CR_TMP/stage
meson install -C "$STASIS_BUILD" --destdir "$stage" --no-rebuild --quiet ||
	cr_fail "meson install --destdir $stage failed"
run=$(find "$stage" -path '*/bin/stasis-run' -type f)
restart=$(find "$stage" -path '*/bin/stasis-restart' -type f)
lib=$(find "$stage" -name libstasis.so -type f)
[[ -x $run && -x $restart && -n $lib ]] ||
	cr_fail "installed files missing: run='$run' restart='$restart' lib='$lib'"
prefixed_lib=${lib#"$stage"}
"$run" --help | grep -qF -- "$prefixed_lib" ||
	cr_fail "installed stasis-run --help does not name the installed library $prefixed_lib"
grep -qF -- "$prefixed_lib" "$restart" || cr_fail "installed stasis-restart does not preload $prefixed_lib"
cr_ok "installed: $run, $restart, $lib (default library $prefixed_lib)"
inspect=$(find "$stage" -path '*/bin/stasis-inspect' -type f)
[[ -x $inspect ]] || cr_fail "stasis-inspect is not installed"
"$inspect" --help | grep -q '^usage: stasis-inspect' || cr_fail "the installed stasis-inspect does not run"
cr_ok "installed: $inspect"
# Without STASIS_LIB the staged script looks for the library at the
# prefix, where it is not: it must say so, not run the job unprotected.
if [[ ! -e $prefixed_lib ]]; then
	out=$(env -u STASIS_LIB "$run" mpirun -np 1 true 2>&1) && cr_fail "the staged script ran without its library: $out"
	grep -qF "$prefixed_lib" <<<"$out" || cr_fail "no line naming the missing library: $out"
	cr_ok "without its library the script stops: $out"
fi

export STASIS_LIB=$lib
CR_STASIS_RUN=$run
CR_STASIS_RESTART=$restart
cr_app heat
cr_reference
cr_run run
cr_wait_commits run 2
cr_kill run
newest=$(cr_newest_complete)
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "the installed stasis-restart resumed checkpoint $newest"
cr_expect_same restart
cr_pass "installed stasis-run and stasis-restart with the installed library: same output"
