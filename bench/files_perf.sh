#!/bin/bash
# files_perf.sh BUILD_DIR: what stasis adds to the program's file calls:
# each round runs bench/files_perf plain and under stasis-run back to back
# (no checkpoint due) and prints, per case, both costs, their ratio and the
# difference in nanoseconds, then the median difference. The overwrite_
# cases are writes in place after a checkpoint (under stasis the first
# over a range saves its bytes in an undo record): overwrite_1MiB is ns per
# MiB, the others ns per 64-byte call.
set -euo pipefail
build=$(cd "${1:?usage: files_perf.sh BUILD_DIR}" && pwd)
exe=$build/bench/files_perf
rounds=${FILES_PERF_ROUNDS:-5}
n=${FILES_PERF_N:-20000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export STASIS_DIR=$dir STASIS_SCHEME=single STASIS_INTERVAL=86400 TMPDIR=$dir

cases=(write_64B pwrite_64B open_close fopen_fclose overwrite_first_64B overwrite_again_64B
	overwrite_1MiB append_reopen_64B mkdir_rmdir)
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
calc() { awk "BEGIN { printf \"%.2f\", $* }"; }

echo "== 2 ranks, $n calls per case, ns per call; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-20s %10s %10s %7s %9s\n' round case plain stasis ratio added_ns
declare -A added
for ((r = 1; r <= rounds; r++)); do
	p=$(mpirun --oversubscribe -np 2 "$exe" "$n")
	s=$("$build/tools/stasis-run" mpirun --oversubscribe -np 2 "$exe" "$n")
	for c in "${cases[@]}"; do
		a=$(field "$c" "$p") b=$(field "$c" "$s")
		d=$(calc "$b - $a")
		added[$c]+="$d "
		printf '%-6s %-20s %10s %10s %7s %9s\n' "$r" "$c" "$a" "$b" "$(calc "$b / $a")" "$d"
	done
done
echo "== median added cost per call (ns; overwrite_1MiB: per MiB)"
for c in "${cases[@]}"; do
	printf '%-20s %9s\n' "$c" "$(tr ' ' '\n' <<<"${added[$c]}" | grep . | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
done
