#!/bin/bash
# incremental_perf.sh BUILD_DIR: what dirty-page tracking buys and costs, for
# three workloads:
#   MAT      dense C = A * B, inputs never change, one row of C per
#            iteration: few pages change per interval (bench/apps/mat.c),
#            4 ranks, STASIS_INTERVAL=1
#   STENCIL  Jacobi sweeps rewriting every page each iteration
#            (bench/apps/stencil.c), 4 ranks, STASIS_INTERVAL=1
#   REWRITE  all of 1 GiB per rank rewritten every iteration
#            (bench/apps/rewrite.c), 2 ranks, STASIS_INTERVAL=3
# and each tracking mode (default: auto, what users get, and mprotect,
# whose faults are dear everywhere), from one set of runs:
#   1. bytes per incremental checkpoint as a fraction of a full one (from
#      the "committed" lines: mean incremental / first full);
#   2. slowdown from tracking: run time with tracking / run time with
#      STASIS_DIRTY=off, same STASIS_INTERVAL, runs alternating off and the
#      modes for ROUNDS rounds (mean of the per-round ratios). Printed
#      twice: whole run time, and run time minus the checkpoints' blocking
#      time (sum of the "committed" ms), which leaves the tracking's own
#      cost (write faults) without the cheaper incremental writes;
#   3. time to collect dirty pages per GiB tracked (the VERBOSE=2 "collected"
#      line of rank 0, incremental checkpoints, mean of ms / GiB);
#   4. what tracking chose at the last checkpoint: bytes write-protected and
#      bytes saved whole (the VERBOSE=1 "tracking" line, all ranks).
# Targets: slowdown <= 1.05 for every workload with auto; MAT's
# incrementals < 1% of a full one.
#
# Env: INCR_PERF_ROUNDS (default 2), INCR_PERF_MODES (default "auto
# mprotect"), INCR_PERF_APPS (default "mat stencil rewrite"),
# INCR_PERF_MAT ("N ITERS", default "3072 300"), INCR_PERF_STENCIL ("M ITERS",
# default "4194304 800"), INCR_PERF_REWRITE ("MIB ITERS", default "1024 80").
set -euo pipefail
build=$(cd "${1:?usage: incremental_perf.sh BUILD_DIR}" && pwd)
rounds=${INCR_PERF_ROUNDS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export TMPDIR=$dir STASIS_DIR=$dir/ckpt STASIS_VERBOSE=2 STASIS_SCHEME=single STASIS_KEEP=1
unset STASIS_FULL_EVERY STASIS_SHADOW_FULL STASIS_INTERVAL

declare -A args=([mat]="${INCR_PERF_MAT:-3072 300}" [stencil]="${INCR_PERF_STENCIL:-4194304 800}"
	[rewrite]="${INCR_PERF_REWRITE:-1024 80}")
declare -A nps=([mat]=4 [stencil]=4 [rewrite]=2)
declare -A intervals=([mat]=1 [stencil]=1 [rewrite]=3)
read -r -a backends <<<"${INCR_PERF_MODES:-auto mprotect}"
read -r -a apps <<<"${INCR_PERF_APPS:-mat stencil rewrite}"

calc() { awk "BEGIN { printf \"%.6f\", $* }"; }

# run APP DIRTY OUT: one stasis-run; stderr to OUT.err, seconds to OUT.s.
run() {
	local app=$1 dirty=$2 out=$3 t0 t1
	rm -rf "$STASIS_DIR"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	STASIS_DIRTY=$dirty STASIS_INTERVAL=${intervals[$app]} "$build/tools/stasis-run" \
		mpirun --oversubscribe -np "${nps[$app]}" "$build/bench/$app" ${args[$app]} \
		>"$out.out" 2>"$out.err"
	t1=$(date +%s.%N)
	calc "$t1 - $t0" >"$out.s"
}

# Sum of the checkpoints' blocking ms in a run.
ckpt_ms() { awk '/committed:/ { s += $(NF-1) } END { printf "%.0f", s }' "$1.err"; }

echo "== dirty-page tracking, $rounds rounds (off, ${backends[*]} alternating); $(uptime)"
for app in "${apps[@]}"; do
	echo "-- ${app^^} (${args[$app]}), ${nps[$app]} ranks, STASIS_INTERVAL=${intervals[$app]}"
	printf '%-6s %-9s %8s %6s %10s %12s\n' round dirty run_s ckpts ckpt_ms checksum
	for r in $(seq "$rounds"); do
		for dirty in off "${backends[@]}"; do
			o=$dir/$app.$dirty.$r
			run "$app" "$dirty" "$o"
			printf '%-6s %-9s %8.2f %6d %10d %s\n' "$r" "$dirty" "$(cat "$o.s")" \
				"$(grep -c 'committed:' "$o.err" || true)" "$(ckpt_ms "$o")" \
				"$(sed -E 's/.*checksum=//' "$o.out")"
		done
	done
	# The answers must not depend on the backend.
	if [[ $(cat "$dir/$app".*.out | sort -u | wc -l) != 1 ]]; then
		echo "WARNING: ${app^^} printed different results under different backends"
	fi
	printf '%-9s %12s %12s %9s %10s %12s %14s %14s %14s\n' dirty full_bytes incr_bytes incr/full \
		slowdown slowdown_cpu collect_ms/GiB protected_B whole_B
	for dirty in "${backends[@]}"; do
		full=0 incr=0 nincr=0 cms=0 ncms=0 ratio=0 ratio2=0
		for r in $(seq "$rounds"); do
			o=$dir/$app.$dirty.$r
			read -r f i ni < <(awk '/committed:/ { b = $(NF-3); k = $(NF-4);
				if (k == "full," && !f) f = b; if (k == "incremental,") { s += b; n++ } }
				END { printf "%.0f %.0f %d\n", f, s, n }' "$o.err")
			((full == 0)) && full=$f
			incr=$((incr + i))
			nincr=$((nincr + ni))
			# "collected dirty pages of <bytes> bytes in <ms> ms": only the
			# incremental checkpoints (the line follows its own id).
			read -r c n < <(awk '/collected dirty pages of/ { id = $3; sub(":", "", id);
				b[id] = $(NF-6); m[id] = $(NF-3) }
				/committed: incremental/ { id = $3; if (id in b && b[id] > 0) {
				s += m[id] / (b[id] / 1073741824); n++ } }
				END { printf "%f %d\n", s, n }' "$o.err")
			cms=$(calc "$cms + $c")
			ncms=$((ncms + n))
			off=$(cat "$dir/$app.off.$r.s")
			on=$(cat "$o.s")
			ratio=$(calc "$ratio + $on / $off")
			ratio2=$(calc "$ratio2 + ($on - $(ckpt_ms "$o") / 1000) / ($off - $(ckpt_ms "$dir/$app.off.$r") / 1000)")
		done
		if ((nincr > 0 && full > 0)); then
			frac=$(calc "100 * $incr / $nincr / $full")%
			incr_mean=$((incr / nincr))
		else
			frac=n/a incr_mean=0
		fi
		per_gib=n/a
		((ncms > 0)) && per_gib=$(calc "$cms / $ncms")
		# What tracking chose at the last checkpoint of the last round.
		read -r prot whole < <(awk '/^stasis: checkpoint [0-9]+ tracking:/ { p = $5; w = $8 }
			END { printf "%s %s\n", p != "" ? p : "-", w != "" ? w : "-" }' \
			"$dir/$app.$dirty.$rounds.err")
		printf '%-9s %12s %12s %9s %10.3f %12.3f %14s %14s %14s\n' "$dirty" "$full" "$incr_mean" "$frac" \
			"$(calc "$ratio / $rounds")" "$(calc "$ratio2 / $rounds")" "$per_gib" "$prot" "$whole"
	done
	echo
done
echo "targets: MAT incr/full < 1%; slowdown with auto <= 1.05 for every workload; $(uptime)"
