#!/bin/bash
# refused.sh KIND...: tests/apps/refuse does, right after MPI_Init, one thing
# to its address space or process that stasis cannot restore (refuse.c
# lists the kinds). For each KIND, under stasis-run the program must finish
# with the uninterrupted run's output, stasis must say in a warning of its
# own line that checkpoints stop, naming what the program did, and no
# checkpoint may be committed past it. For a conflict stasis only warns
# about (sigwait), the warning must name it.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

(($# > 0)) || cr_fail "usage: refused.sh KIND..."
cr_setup

# What the warning must name, per kind.
declare -A names=(
	[file]='mmap.MAP_SHARED. of a file, writable ./tmp/stasis-refuse'
	[fixed]='fixed anonymous mmap.. outside'
	[shmat]='shared memory .shmat.'
	[sbrk]='sbrk..'
	[pkey]='protection keys .pkey_alloc.'
	[personality]='personality..'
	[mdwe]='prctl.PR_SET_MDWE.'
	[timer]='posix timer run on a thread .timer_create, sigev_thread.'
	[text]='making code or read-only data'
	[guard]='madvise.MADV_GUARD_INSTALL.'
	[fork-shared]='fork.. of a program with anonymous map_shared'
	[sigwait]='takes signal 10 .* itself .sigtimedwait.'
)
# Conflicts stasis only warns about: checkpoints go on.
declare -A warn_only=([sigwait]=1)

iters=
for kind in "$@"; do
	[[ -n ${names[$kind]:-} ]] || cr_fail "unknown kind $kind"
	cr_app refuse "--$kind" 4096 "${iters:-2000}"
	if [[ -z $iters ]]; then
		# The answer does not depend on the kind: one uninterrupted run,
		# whose iteration count (grown to last long enough) every kind uses.
		cr_reference 1
		iters=${CR_ARGS[2]}
	fi
	cr_run_wait "$kind"
	cr_expect_status "$kind" 0
	cr_expect_same "$kind"
	if [[ -n ${warn_only[$kind]:-} ]]; then
		cr_expect_words "$kind" "stasis warns about --$kind" '^stasis' "${names[$kind]}"
		continue
	fi
	cr_expect_words "$kind" "stasis warns about --$kind" '^stasis' "${names[$kind]}" 'checkpoints are skipped'
	commits=$(cr_commits "$kind")
	if ((commits > 0)); then
		cr_show "$kind"
		cr_fail "--$kind: $commits checkpoints were committed past what stasis cannot restore"
	fi
done
cr_pass "refuse $*: same output under stasis-run, each named in a warning, no checkpoint past it"
