"""h5steps.py: the Python twin of h5steps.c, through h5py over MPI-IO
(Debian's python3-h5py-mpi, which h5py picks under mpirun) and mpi4py: one
HDF5 file kept open, every step a new dataset written by slabs, a chunked
dataset grown by a row, an attribute rewritten and a flush; the previous
step's slab and the attribute are read back into the answer, so that a
restart that did not put the file back gives another one.

    python3 h5steps.py [N [STEPS]]

Output (rank 0): h5steps.py: n=<N> steps=<STEPS> checksum=<hex>
"""
import hashlib
import sys

from mpi4py import MPI
import h5py
import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if not h5py.get_config().mpi:
    sys.exit("h5steps.py: h5py is not built with MPI")
x = np.arange(n, dtype=np.float64) % 97 / 97.0 + rank
h = hashlib.sha256()
with h5py.File("h5steps.h5", "w", driver="mpio", comm=comm, track_order=False) as f:
    hist = f.create_dataset("history", shape=(0, n * size), maxshape=(None, n * size),
                            chunks=(1, n * size), dtype="f8", track_times=False)
    f.attrs["steps"] = 0
    me = slice(n * rank, n * (rank + 1))
    for s in range(steps):
        x = 0.5 * x + 0.25 * np.roll(x, -1) + 1e-3 * ((s + np.arange(n)) % 7)
        d = f.create_dataset("step%05d" % s, shape=(n * size,), dtype="f8",
                             track_times=False)
        with d.collective:
            d[me] = x
        hist.resize(s + 1, axis=0)
        with hist.collective:
            hist[s, me] = x
        if s > 0:
            prev = f["step%05d" % (s - 1)]
            with prev.collective:
                h.update(prev[me].tobytes())
        if f.attrs["steps"] != s:
            sys.exit("h5steps.py: the steps attribute is %d, not %d" % (f.attrs["steps"], s))
        f.attrs["steps"] = s + 1
        f.flush()
        comm.Barrier()
digests = comm.gather(h.hexdigest(), root=0)
if rank == 0:
    print("h5steps.py: n=%d steps=%d checksum=%s" %
          (n, steps, hashlib.sha256("".join(digests).encode()).hexdigest()[:16]))
