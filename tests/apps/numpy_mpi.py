"""numpy_mpi: a short numpy + mpi4py computation, as a Python user
writes one: a diffusion on a numpy grid split into rows across the ranks,
halos exchanged with Sendrecv, a sum reduced every step, matrix products
(BLAS), a random generator's state, a dict and a Decimal growing as it
goes, and now and then a shell run through subprocess (CPython makes its
children with vfork(): they run in the rank's memory until they exec).
Every 5 steps it saves its first row in a directory of its own it makes
with os.makedirs, and removes the one of 10 steps before (os.remove,
os.rmdir): both raise if a restart finds the directory there already or
the file gone. A table is read through numpy.load(mmap_mode='r') (a read-only MAP_SHARED
mapping, its descriptor kept open by Python's mmap) from a temporary
directory removed at once (the descriptor's file then has no name).
mpi4py asks
for its default thread level (MPI_THREAD_MULTIPLE) and loads the MPI
library on import; json and decimal (extension modules of their own) are
imported after MPI_Init.

    python3 numpy_mpi.py ITERS [N]

Output (rank 0, stdout, at the end): one line with every rank's digest.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from mpi4py import MPI

import decimal
import json


def main():
    iters = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(1234 + rank)
    u = rng.random((n, n))
    up, down = (rank - 1) % size, (rank + 1) % size
    top, bottom = np.empty(n), np.empty(n)
    hist = {}
    acc = decimal.Decimal(0)
    with tempfile.TemporaryDirectory() as tmp:
        name = os.path.join(tmp, "table.npy")
        np.save(name, np.sin(np.arange(100000) * 1e-3 + rank))
        table = np.load(name, mmap_mode="r")
    work = tempfile.mkdtemp(prefix="numpy_mpi.")
    for it in range(iters):
        comm.Sendrecv(u[0].copy(), dest=up, recvbuf=bottom, source=down)
        comm.Sendrecv(u[-1].copy(), dest=down, recvbuf=top, source=up)
        ext = np.vstack([top, u, bottom])
        u = 0.25 * (ext[:-2] + ext[2:] + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1))
        u += 1e-3 * rng.standard_normal(u.shape)
        at = (it * 37) % (len(table) - n)
        u[it % n] += 1e-4 * table[at:at + n]
        s = comm.allreduce(float(u.sum()), op=MPI.SUM)
        acc += decimal.Decimal(s).quantize(decimal.Decimal("1e-6"))
        key = "k%d" % (it % 97)
        hist[key] = hist.get(key, 0) + int(abs(s) * 1000) % 1009
        if it % 50 == 0:
            hist["w%d" % it] = round(float(np.linalg.norm(u)), 9)
        if it % 5 == 0:
            step = os.path.join(work, "step%d" % it)
            os.makedirs(step)
            np.save(os.path.join(step, "row.npy"), u[0])
            if it >= 10:
                old = os.path.join(work, "step%d" % (it - 10))
                os.remove(os.path.join(old, "row.npy"))
                os.rmdir(old)
        if it % 25 == 0:
            out = subprocess.run(["sh", "-c", "echo %d $((%d * 3))" % (it, rank)],
                                 capture_output=True, text=True, check=True).stdout
            hist["s%d" % it] = out.strip()
        if it % 10 == 0:
            # A matrix product: BLAS's, on its threads if it has any.
            hist["m%d" % it] = round(float((u @ u.T).trace()), 6)
    hist["left"] = sorted(os.listdir(work))
    hist["last"] = round(float(np.load(os.path.join(work, "step%d" % (iters - 1 - (iters - 1) % 5), "row.npy")).sum()), 9)
    shutil.rmtree(work)
    mine = zlib.crc32(u.tobytes()) ^ zlib.crc32(json.dumps(hist, sort_keys=True).encode())
    every = comm.gather([mine, str(acc)], root=0)
    if rank == 0:
        print("numpy_mpi: iters=%d n=%d ranks=%d %s" % (iters, n, size, json.dumps(every)))


main()
