"""petsc_steps.py STEPS: a PETSc program in Python (Debian's python3-petsc4py,
PETSc 3.18 over Open MPI): a 2D Laplacian on a distributed grid (DMDA),
solved with GMRES and Jacobi STEPS times, each right-hand side fed by the
last solution. Rank 0 prints, at the end, one line per step: iterations and
the norm of the solution to the last bit.

What it asks of a checkpointer: petsc4py's extension module pulls in, by
dlopen() after MPI_Init, PETSc and its whole dependency tree (HDF5, MUMPS,
SuperLU, hypre, ScaLAPACK... about 135 MiB, libpetsc's dynamic string
table alone 300 KiB), and PetscInitialize adds PETSc's own MPI error class
and codes (MPI_Add_error_class, MPI_Add_error_code)."""
import sys

from petsc4py import PETSc

n = 160
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
da = PETSc.DMDA().create([n, n], stencil_width=1)
A = da.createMatrix()
(xs, xe), (ys, ye) = da.getRanges()
row = PETSc.Mat.Stencil()
col = PETSc.Mat.Stencil()
for j in range(ys, ye):
    for i in range(xs, xe):
        row.index = (i, j)
        if i in (0, n - 1) or j in (0, n - 1):
            A.setValueStencil(row, row, 1.0)
            continue
        for di, dj, v in ((0, 0, 4.0), (-1, 0, -1.0), (1, 0, -1.0), (0, -1, -1.0), (0, 1, -1.0)):
            col.index = (i + di, j + dj)
            A.setValueStencil(row, col, v)
A.assemble()
ksp = PETSc.KSP().create()
ksp.setOperators(A)
ksp.setType("gmres")
ksp.getPC().setType("jacobi")
ksp.setTolerances(rtol=1e-8)
x = da.createGlobalVec()
b = da.createGlobalVec()
u = da.createGlobalVec()
u.set(0.0)
lines = []
for s in range(steps):
    b.set(1.0 + 0.01 * s)
    b.axpy(0.001, u)
    ksp.solve(b, x)
    u.axpby(0.3, 0.7, x)
    lines.append("step %d its %d norm %.17g" % (s, ksp.getIterationNumber(), u.norm()))
PETSc.Sys.Print("\n".join(lines))
