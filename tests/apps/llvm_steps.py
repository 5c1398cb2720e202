"""llvm_steps.py: a Python program under mpi4py that loads, after MPI_Init,
a native library with a deep dependency tree through ctypes: Debian's
libclang-cpp.so.14 (clang-14), which needs libLLVM-14, libz3, libicuuc,
libicudata, libxml2 and more, some 250 MiB of segments in one dlopen().
Every step it keeps state in LLVM (a module's global variable, rewritten
through the LLVM C API and read back) and exchanges a value with the other
ranks, so that a restart with LLVM elsewhere, or its heap lost, gives
another answer or crashes.

    python3 llvm_steps.py STEPS

Output (rank 0): llvm_steps.py: steps=<STEPS> checksum=<hex>
"""
import ctypes
import hashlib
import sys
import time

from mpi4py import MPI

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
comm = MPI.COMM_WORLD
rank = comm.Get_rank()

lib = ctypes.CDLL("libclang-cpp.so.14")
P = ctypes.c_void_p
for name, res, args in [
    ("LLVMContextCreate", P, []),
    ("LLVMModuleCreateWithNameInContext", P, [ctypes.c_char_p, P]),
    ("LLVMInt64TypeInContext", P, [P]),
    ("LLVMAddGlobal", P, [P, P, ctypes.c_char_p]),
    ("LLVMConstInt", P, [P, ctypes.c_ulonglong, ctypes.c_int]),
    ("LLVMSetInitializer", None, [P, P]),
    ("LLVMGetInitializer", P, [P]),
    ("LLVMConstIntGetZExtValue", ctypes.c_ulonglong, [P]),
]:
    f = getattr(lib, name)
    f.restype, f.argtypes = res, args
    globals()[name] = f

ctx = LLVMContextCreate()
mod = LLVMModuleCreateWithNameInContext(b"steps", ctx)
i64 = LLVMInt64TypeInContext(ctx)
g = LLVMAddGlobal(mod, i64, b"state")
LLVMSetInitializer(g, LLVMConstInt(i64, 1 + rank, 0))
h = hashlib.sha256()
for s in range(steps):
    v = LLVMConstIntGetZExtValue(LLVMGetInitializer(g))
    total = comm.allreduce(v % 1000003)
    v = (v * 6364136223846793005 + total + s) % (1 << 64)
    LLVMSetInitializer(g, LLVMConstInt(i64, v, 0))
    h.update(v.to_bytes(8, "little"))
    time.sleep(0.005)
digests = comm.gather(h.hexdigest()[:16], root=0)
if rank == 0:
    print("llvm_steps.py: steps=%d checksum=%s" % (steps, ",".join(digests)))
