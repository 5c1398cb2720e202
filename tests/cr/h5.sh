#!/bin/bash
# h5.sh c|python: a program writing its output with parallel HDF5 over
# MPI-IO every step (tests/apps/h5steps.c, Debian's libhdf5-openmpi-dev;
# tests/apps/h5steps.py, h5py over MPI-IO from python3-h5py-mpi): HDF5
# rewrites its superblock, object headers, B-trees and the attribute in
# place every step, and reads back what it wrote. Killed after two
# checkpoints and restarted, the undo records put the file back as it was at
# the checkpoint (process/undo.h): the output and the HDF5 file must equal
# an uninterrupted run's, byte for byte.
set -euo pipefail
# shellcheck source=../lib/cr.sh
source "$(dirname "$0")/../lib/cr.sh"

lang=${1:?usage: h5.sh c|python}
CR_NP=2
case $lang in
c)
	[[ -x $STASIS_BUILD/tests/apps/h5steps ]] ||
		cr_skip "h5steps was not built (no hdf5-openmpi: Debian's libhdf5-openmpi-dev)"
	cr_setup
	cr_app h5steps 64 1500
	;;
python)
	python=/usr/bin/python3
	OMPI_COMM_WORLD_SIZE=2 "$python" -c 'import mpi4py, h5py, sys; sys.exit(not h5py.get_config().mpi)' 2>/dev/null ||
		cr_skip "$python has no h5py over MPI (Debian's python3-h5py-mpi, python3-mpi4py)"
	cr_setup
	unset MPI4PY_RC_THREAD_LEVEL
	cr_app "$python" "$(dirname "$(readlink -f "$0")")/../apps/h5steps.py" 64 600
	;;
*) cr_fail "unknown language $lang" ;;
esac
# The uninterrupted run's file is compared: it runs here, never shared.
export CR_REF_SHARED=0
ref=$CR_TMP/ref
run=$CR_TMP/run
mkdir -p "$ref" "$run"
cd "$ref"
cr_reference 2
cd "$run"

# Killed once the newest checkpoint (the second or later) has an undo
# record: the file was written in place after it (Python's imports take
# the first checkpoints).
cr_run run
cr_wait_commits run 2
deadline=$((SECONDS + CR_TIMEOUT))
while :; do
	newest=$(cr_newest_complete)
	[[ -n $(find "$STASIS_DIR" -name "ckpt-$newest.r*.undo" -size +0) ]] && break
	cr_alive run || cr_fail "the run ended before an undo record of its newest checkpoint was written"
	((SECONDS < deadline)) || cr_fail "no undo record was written in ${CR_TIMEOUT}s: HDF5 wrote nothing in place?"
	sleep 0.05
done
cr_kill run
newest=$(cr_newest_complete)
undo=$(find "$STASIS_DIR" -name '*.undo' -size +0 | wc -l)
cr_ok "$undo undo records on disk, newest checkpoint $newest"

cr_restart restart
cr_expect_status restart 0
cr_expect_line restart "resumed from checkpoint $newest\\b" "resumed from the newest checkpoint ($newest)"
cr_expect_same restart
cmp "$ref/h5steps.h5" "$run/h5steps.h5" || cr_fail "h5steps.h5 differs from the uninterrupted run's"
cr_ok "h5steps.h5 ($(stat -c %s "$run/h5steps.h5") bytes) is identical to the uninterrupted run's"
cr_pass "$lang HDF5 over MPI-IO written in place, killed after 2 checkpoints, restarted: same output, same file"
