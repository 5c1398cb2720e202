#!/bin/bash
# compress_perf.sh BUILD_DIR: image sizes and write times with and without
# compression (STASIS_COMPRESS) and zero-page elision, on the memory of
# the real programs the tests run: each runs under stasis-run (full images
# only, one interval) and its newest image per rank is written again by
# compress_perf with each codec, side by side (see compress_perf.c):
#   heat     the suite's C stencil (tests/apps/heat), 2 ranks
#   lammps   LAMMPS melt example, 2 ranks
#   pw       Quantum ESPRESSO pw.x, silicon SCF, 2 ranks
#   numpy    numpy + mpi4py (tests/apps/numpy_mpi.py), 2 ranks
# Programs not installed are skipped. Env: COMPRESS_PERF_DIR, where images
# are written (default /var/tmp: a disk, where compression pays).
set -euo pipefail
build=$(cd "${1:?usage: compress_perf.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=${COMPRESS_PERF_DIR:-/var/tmp}
dir=$(mktemp -d /tmp/stasis-bench.XXXXXX)
wdir=$(mktemp -d "$out/stasis-compress.XXXXXX")
trap 'rm -rf "$dir" "$wdir"' EXIT
export STASIS_SCHEME=single STASIS_KEEP=1 STASIS_FULL_EVERY=1 STASIS_INTERVAL=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

run() { # run NAME COMMAND...: under stasis-run, its images kept in $dir/NAME
	local name=$1
	shift
	mkdir -p "$dir/$name/work"
	(cd "$dir/$name/work" && STASIS_DIR=$dir/$name/ckpt/%r timeout 300 \
		"$build/tools/stasis-run" mpirun --oversubscribe -np 2 "$@" >"$dir/$name/out" 2>&1) ||
		{ echo "$name: the run failed (tail of its output below)"; tail -5 "$dir/$name/out"; return 0; }
	for r in 0 1; do
		img=$(ls -t "$dir/$name/ckpt/$r"/*/ckpt-*.img 2>/dev/null | head -1 || true)
		if [[ -n $img ]]; then
			cp -p "$img" "$dir/images/$name.r$r.img"
		else
			echo "$name: no checkpoint of rank $r (it ended within an interval)"
		fi
	done
}

mkdir -p "$dir/images"
run heat "$build/tests/apps/heat" 2000 3000
if command -v lmp >/dev/null && [[ -r /usr/share/lammps/examples/melt/in.melt ]]; then
	sed -E "s/^run[[:space:]]+[0-9]+/run 6000/" /usr/share/lammps/examples/melt/in.melt >"$dir/in.melt"
	run lammps lmp -in "$dir/in.melt" -log none
fi
if command -v pw.x >/dev/null && [[ -r /usr/share/espresso/pseudo/Si.pz-vbc.UPF ]]; then
	cat >"$dir/si.in" <<EOI
&control
  calculation = 'scf', prefix = 'si', outdir = '$dir/qe', pseudo_dir = '/usr/share/espresso/pseudo', disk_io = 'none'
/
&system
  ibrav = 2, celldm(1) = 10.20, nat = 2, ntyp = 1, ecutwfc = 30.0
/
&electrons
  conv_thr = 1.0d-12, mixing_beta = 0.7
/
ATOMIC_SPECIES
 Si 28.086 Si.pz-vbc.UPF
ATOMIC_POSITIONS alat
 Si 0.00 0.00 0.00
 Si 0.25 0.25 0.25
K_POINTS automatic
 8 8 8 0 0 0
EOI
	run pw pw.x -in "$dir/si.in"
fi
if /usr/bin/python3 -c 'import numpy, mpi4py' 2>/dev/null; then
	run numpy /usr/bin/python3 "$src/tests/apps/numpy_mpi.py" 3000 512
fi
echo "written to $out (best of 3 each):"
"$build/bench/compress_perf" "$wdir" "$dir"/images/*.img
