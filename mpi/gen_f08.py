"""The mpi_f08 entry points, for gen_wrappers.py (issue 16).

A `use mpi_f08` program calls the f08 bindings' own symbols,
mpi_<name>_f08_ (the specific procedure MPI_<Name>_f08 the standard names
for the profiling interface), never mpi_<name>_ nor the C function. In
Open MPI 4.1 every one of them only forwards to the mpif.h function of the
same name (ompi_<name>_f or pmpi_<name>_, one function with mpi_<name>_;
checked with objdump on Debian 12's libmpi_usempif08.so.40; the one
exception is MPI_Buffer_detach, below), with its arguments unchanged: a type(MPI_Comm) and friends is one
INTEGER, the Fortran handle, type(MPI_Status) the six INTEGERs of mpif.h's
status, character arguments the same hidden lengths. Only IERROR differs:
it is OPTIONAL, a null pointer when the program leaves it out.

So each f08 entry point of a call stasis wraps for Fortran is a
trampoline into that Fortran wrapper, which translates the handles and
calls the mpif.h function (what the f08 one would have called). A binding
that passes arguments some other way (the _f08ts names, with descriptors)
is not wrapped: the program's MPI_Init is then unseen, and said so
(mpi/unseen.h).
"""

# Hand-written Fortran wrappers of mpi/ (custom kind) have the C
# prototype's parameters plus IERROR; MPI_Init, MPI_Init_thread and
# MPI_Finalize are preload's, with f08 twins of their own there.
PRELOAD = ("Init", "Init_thread", "Finalize")


# MPI_Buffer_detach's f08 form returns the buffer's address (a TYPE(C_PTR)),
# which mpif.h's does not: the f08 function itself is called, and the
# buffer stasis attaches again at a restart forgotten as the Fortran
# wrapper does (no handle to translate).
BUFFER_DETACH = """
EXPORT void mpi_buffer_detach_f08_(void *buffer_addr, MPI_Fint *size, MPI_Fint *ierr)
{
	static void (*real)(void *, MPI_Fint *, MPI_Fint *);
	MPI_Fint e_ = MPI_SUCCESS;

	if (!ierr)
		ierr = &e_;
	stasis_depth++;
	coord_entry();
	if (!real)
		real = stasis_next_symbol("mpi_buffer_detach_f08_");
	real(buffer_addr, size, ierr);
	if (*ierr == MPI_SUCCESS)
		mpi_buffer_detached();
	stasis_depth--;
}
"""


def f08_wrapped(f, fortran_wrapper):
    """Whether f gets an f08 entry point: it has a Fortran wrapper of
    stasis's (fortran_wrapper: the generator's own test) or a hand-written
    one in mpi/."""
    if f.kind == "custom":
        return f.name not in PRELOAD
    return fortran_wrapper


def emit_f08(funcs):
    """mpi_<name>_f08_ for each of funcs, calling stasis's mpi_<name>_."""
    out = ["\n/* mpi_f08 (gen_f08.py): each entry point forwards to the Fortran wrapper. */\n"]
    for f in funcs:
        if f.name == "Buffer_detach":
            out.append(BUFFER_DETACH)
            continue
        sym = "mpi_%s_" % f.name.lower()
        nchar = sum(1 for p in f.params if p.is_char())
        params = ["void *a%d" % i for i in range(len(f.params))]
        lens = ["size_t l%d" % i for i in range(nchar)]
        args = ["a%d" % i for i in range(len(f.params))] + ["ierr ? ierr : &e_"] + \
            ["l%d" % i for i in range(nchar)]
        if f.kind == "custom":
            out.append("void %s(%s);\n" % (sym, ", ".join(
                ["void *"] * len(f.params) + ["MPI_Fint *"] + ["size_t"] * nchar)))
        out.append("\nEXPORT void %sf08_(%s)\n{\n\tMPI_Fint e_ = MPI_SUCCESS;\n\n\t%s(%s);\n}\n" % (
            sym, ", ".join(params + ["MPI_Fint *ierr"] + lens), sym, ", ".join(args)))
    return "".join(out)
