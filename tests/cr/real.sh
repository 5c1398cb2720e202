#!/bin/bash
# real.sh lammps|pw|meep|cp2k|openfoam [stdin]: a real MPI program from Debian's packages, written by
# nobody here, killed after two checkpoints and restarted; what it printed
# must be what an uninterrupted run prints:
#   lammps  LAMMPS (C++), the melt example with a longer run, 2 ranks: its
#           thermo table. With stdin, its script comes on standard input
#           (lmp < in.melt, every run and the restart given the same file),
#           with a second run after the first: LAMMPS reads its commands
#           as it goes, and the restart must go on from the command after
#           the run it was in, not from the script's start
#   pw      Quantum ESPRESSO's pw.x (Fortran; splits its communicators
#           through the Fortran bindings), a silicon SCF, 2 ranks: the
#           energies and accuracies of its iterations
#   meep    MIT's Meep FDTD solver scripted in Scheme (meep-openmpi: Guile
#           and libctl, Boehm GC's marker threads, which block every
#           signal, and Guile's compiled .go files, mmap()ed MAP_PRIVATE), a
#           2D waveguide, 2 ranks: the field at two points every 20 time
#           units
#   cp2k    CP2K (Fortran, ScaLAPACK, communicators freed while their
#           requests are pending), Born-Oppenheimer MD of one water
#           molecule, 2 ranks: energies and conserved quantity per step
#   openfoam OpenFOAM's icoFoam (C++, its Pstream over MPI) on the lid-driven
#           cavity, 80 x 80 cells decomposed in 2: its Courant numbers
#           and solver residuals per time step
# The killed run's lines must be a prefix of the uninterrupted run's, the
# restart's a suffix ending the same way, and together they must leave no
# line out. The program's size (steps, k-points) is raised until the
# uninterrupted run lasts long enough for the checkpoints to come.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

what=${1:?usage: real.sh lammps|pw|meep|cp2k|openfoam}
CR_NP=2
export STASIS_INTERVAL=0.5
cr_setup
# Checkpoints the run must commit before it is killed.
want=2
# A real program writes files where it runs: its own reference run.
export CR_REF_SHARED=0

case $what in
lammps)
	exe=$(command -v lmp || true)
	deck=/usr/share/lammps/examples/melt/in.melt
	[[ -n $exe && -r $deck ]] || cr_skip "lmp or $deck missing (Debian's lammps, lammps-examples)"
	# Thermo rows: a step number, then numbers.
	lines_re='^ +[0-9]+ +-?[0-9]'
	size=2000
	make_input() { sed -E "s/^run[[:space:]]+[0-9]+/run $1/" "$deck" >"$CR_TMP/in.melt"; }
	args=(-in "$CR_TMP/in.melt" -log none)
	if [[ ${2:-} == stdin ]]; then
		make_input() {
			sed -E "s/^run[[:space:]]+[0-9]+/run $1/" "$deck" >"$CR_TMP/in.melt"
			printf 'thermo 10\nrun 100\n' >>"$CR_TMP/in.melt"
		}
		args=(-log none)
		export CR_STDIN=$CR_TMP/in.melt
	fi
	;;
pw)
	exe=$(command -v pw.x || true)
	pseudo=/usr/share/espresso/pseudo
	[[ -n $exe && -r $pseudo/Si.pz-vbc.UPF ]] ||
		cr_skip "pw.x or $pseudo/Si.pz-vbc.UPF missing (Debian's quantum-espresso, quantum-espresso-data)"
	lines_re='total energy|estimated scf accuracy'
	size=4
	# Silicon in the diamond structure; SIZE is the k-point mesh.
	make_input() {
		cat >"$CR_TMP/si.in" <<EOF
&control
  calculation = 'scf', prefix = 'si', outdir = '$CR_TMP/qe',
  pseudo_dir = '$pseudo', disk_io = 'none'
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
 $1 $1 $1 0 0 0
EOF
	}
	args=(-in "$CR_TMP/si.in")
	# OpenBLAS would start threads of its own.
	export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
	;;
meep)
	exe=$(command -v meep || true)
	[[ -n $exe ]] || cr_skip "meep missing (Debian's meep-openmpi)"
	lines_re='^Ez '
	size=800
	# SIZE: the time units simulated (40 time steps each).
	make_input() {
		cat >"$CR_TMP/wg.ctl" <<EOF
(set! geometry-lattice (make lattice (size 16 8 no-size)))
(set! geometry (list (make block (center 0 0) (size infinity 1 infinity)
                      (material (make dielectric (epsilon 12))))))
(set! sources (list (make source (src (make continuous-src (frequency 0.15)))
                     (component Ez) (center -7 0))))
(set! pml-layers (list (make pml (thickness 1.0))))
(set! resolution 20)
(run-until $1 (at-every 20 (lambda ()
  (print "Ez " (meep-time) " " (get-field-point Ez (vector3 0 0))
         " " (get-field-point Ez (vector3 3 0.2)) "\\n"))))
EOF
	}
	args=("$CR_TMP/wg.ctl")
	;;
cp2k)
	exe=$(command -v cp2k.psmp || true)
	deck=/usr/share/doc/cp2k/examples/H2O.inp
	[[ -n $exe && -r $deck ]] || cr_skip "cp2k.psmp or $deck missing (Debian's cp2k)"
	lines_re='Conserved quantity|Total FORCE_EVAL'
	size=80
	# Into its MD steps, where it frees communicators whose requests are
	# still pending.
	want=6
	# SIZE: MD steps.
	make_input() { sed -E "s/^([[:space:]]*STEPS)[[:space:]]+[0-9]+/\\1 $1/" "$deck" >"$CR_TMP/H2O.inp"; }
	args=(-i "$CR_TMP/H2O.inp")
	# It writes its trajectory and restart files where it runs.
	cd "$CR_TMP"
	export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
	;;
openfoam)
	exe=$(command -v icoFoam || true)
	cavity=/usr/share/doc/openfoam-examples/examples/incompressible/icoFoam/cavity/cavity
	[[ -n $exe && -r /usr/share/openfoam/etc/bashrc && -d $cavity ]] ||
		cr_skip "icoFoam or its cavity example missing (Debian's openfoam, openfoam-examples)"
	set +u
	# shellcheck disable=SC1091
	source /usr/share/openfoam/etc/bashrc >/dev/null 2>&1 || true
	set -u
	case=$CR_TMP/cavity
	cp -r "$cavity" "$case"
	find "$case" -name '*.gz' -exec gunzip {} +
	sed -i 's/(20 20 1)/(80 80 1)/' "$case/system/blockMeshDict"
	cat >"$case/system/decomposeParDict" <<EOF
FoamFile { version 2.0; format ascii; class dictionary; object decomposeParDict; }
numberOfSubdomains 2;
method simple;
coeffs { n (2 1 1); }
EOF
	(cd "$case" && blockMesh >log.blockMesh 2>&1 && decomposePar >log.decomposePar 2>&1) ||
		cr_fail "cannot set the cavity case up: $(tail -n 3 "$case"/log.*)"
	lines_re='^(Time = |Courant Number|DILUPBiCG|DICPCG|time step continuity)'
	size=1300
	# SIZE: time steps of 0.001.
	make_input() {
		sed -i -E "s/^(deltaT[[:space:]]+).*/\\10.001;/; s/^(endTime[[:space:]]+).*/\\1$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)));/; s/^(writeInterval[[:space:]]+).*/\\1100;/" "$case/system/controlDict"
	}
	args=(-parallel -case "$case")
	;;
*)
	echo "unknown program $what" >&2
	exit 1
	;;
esac

cr_app "$exe" "${args[@]}"

# wait_for_commits NAME N: 0 once the job committed N checkpoints, 1 if it
# ended before (the program was too small for the checkpoints to come).
wait_for_commits() {
	local name=$1 n=$2 deadline=$((SECONDS + CR_TIMEOUT))
	while (($(cr_commits "$name") < n)); do
		if ! cr_alive "$name"; then
			(($(cr_commits "$name") >= n)) && return 0
			cr_reap "$name"
			return 1
		fi
		((SECONDS < deadline)) || cr_fail "job $name committed $(cr_commits "$name") of $n checkpoints in ${CR_TIMEOUT}s"
		sleep 0.05
	done
}

# The size is raised until the uninterrupted run lasts long enough, and
# again while the run under stasis (faster than the uninterrupted one on a
# loaded machine, as measured here for pw.x) ends before its second
# checkpoint.
max_runs=3
runs=0
for ((try = 1; ; try++)); do
	make_input "$size"
	cr_reference 0
	old=$size
	if ((CR_REF_MS >= 6000)); then
		cr_run run
		wait_for_commits run "$want" && break
		cr_expect_status run 0
		cr_say "the run under stasis ended after $(cr_commits run) checkpoint(s)"
		((++runs < max_runs)) ||
			cr_fail "the run under stasis ended after $(cr_commits run) checkpoint(s) at every size tried"
		if [[ $what == pw ]]; then size=$((size + 2)); else size=$((size * 2)); fi
	elif [[ $what == pw ]]; then
		size=$((size + 2 + size * (6000 - CR_REF_MS) / (3 * CR_REF_MS + 1)))
	else
		size=$((size * (9000 + CR_REF_MS - 1) / CR_REF_MS))
	fi
	((try < 5)) || cr_fail "the program ended before its second checkpoint at every size tried"
	cr_say "too short for the checkpoints to come: size $old -> $size"
done
cr_ok "job run committed $want checkpoints"
grep -E -- "$lines_re" "$CR_TMP/ref.out" >"$CR_TMP/ref.lines" || true
total=$(wc -l <"$CR_TMP/ref.lines")
((total >= 10)) || cr_fail "the uninterrupted run printed $total lines to compare, too few to tell"

cr_kill run
# Every attempt must have been committed: a failed one (a state stasis
# could not record) leaves the program less protected than it says.
if line=$(grep -m 1 -E 'checkpoint [0-9]+ failed|checkpoint skipped' "$CR_TMP/run.err"); then
	cr_show run
	cr_fail "a checkpoint of the run failed: $line"
fi
cr_restart restart
cr_expect_status restart 0
cr_expect_line restart 'resumed from checkpoint [0-9]+' "the restart resumed"

grep -E -- "$lines_re" "$CR_TMP/run.out" >"$CR_TMP/run.lines" || true
grep -E -- "$lines_re" "$CR_TMP/restart.out" >"$CR_TMP/restart.lines" || true
run_n=$(wc -l <"$CR_TMP/run.lines")
restart_n=$(wc -l <"$CR_TMP/restart.lines")
head -n "$run_n" "$CR_TMP/ref.lines" | cmp -s - "$CR_TMP/run.lines" ||
	cr_fail "the killed run's lines are not the first lines of the uninterrupted run's"
((restart_n > 0)) || cr_fail "the restart printed none of the lines compared"
tail -n "$restart_n" "$CR_TMP/ref.lines" | cmp -s - "$CR_TMP/restart.lines" || {
	diff <(tail -n "$restart_n" "$CR_TMP/ref.lines") "$CR_TMP/restart.lines" | head -n 20 || true
	cr_fail "the restart's lines are not the last lines of the uninterrupted run's"
}
((run_n + restart_n >= total)) ||
	cr_fail "$((total - run_n - restart_n)) lines between the checkpoint and the kill are missing"
cr_ok "killed run printed $run_n lines, the restart $restart_n, of $total: the same lines"
cr_pass "$what: killed after $want checkpoints, restarted, same output"
