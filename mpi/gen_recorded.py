"""The calls recorded by their arguments (calls.def kinds type_new and
persistent: datatype constructors, persistent requests), their recorders
and replayers, and the trampolines of user ops and error handlers, for
gen_wrappers.py.
"""
from gen_table import ERRHANDLER_SLOTS, OP_SLOTS, indent, req_kind


def emit_recorder(f):
    """mpi_record_<Name>(b, args): the call id and its arguments."""
    made = f.params[-1]
    params = []
    puts = ["recbuf_int(b, CALL_%s);" % f.name]
    for p in f.params[:-1]:
        params.append(p.text)
        n = p.name
        if p.handle_scalar():
            puts.append("recbuf_handle(b, %s, %s);" % (p.kind, n))
        elif p.handle_array():
            puts.append("recbuf_handles(b, %s, (void *const *)%s, %s);" %
                        (p.kind, n, f.lens[n]))
        elif p.base == "int" and not p.array and p.ptr == 0:
            puts.append("recbuf_int(b, %s);" % n)
        elif p.base == "int" and p.array:
            puts.append("recbuf_ints(b, %s, %s);" % (n, f.lens[n]))
        elif p.base == "MPI_Aint" and p.array:
            puts.append("recbuf_aints(b, %s, %s);" % (n, f.lens[n]))
        elif p.base in ("MPI_Aint", "MPI_Count", "MPI_Offset") and not p.array:
            puts.append("recbuf_u64(b, (uint64_t)%s);" % n)
        elif p.base == "void" and p.ptr == 1:
            puts.append("recbuf_u64(b, (uintptr_t)%s);" % n)
        else:
            raise SystemExit("MPI_%s: cannot record parameter %s" % (f.name, p.text))
    if not made.handle_ptr():
        raise SystemExit("MPI_%s: the last parameter must be the object made" % f.name)
    return "\nvoid mpi_record_%s(struct rec_builder *b, %s)\n{\n%s\n}\n" % (
        f.name, ", ".join(params), indent(puts))


def emit_replayer(f):
    reads, args = [], []
    for i, p in enumerate(f.params[:-1]):
        v = "a%d" % i
        if p.handle_scalar():
            reads.append("%s %s = (%s)recread_handle(r, %s);" % (p.base, v, p.base, p.kind))
        elif p.handle_array():
            reads.append("int n%d;" % i)
            reads.append("%s *%s = (%s *)recread_handles(r, %s, &n%d);" % (p.base, v, p.base, p.kind, i))
        elif p.base == "int" and not p.array:
            reads.append("int %s = recread_int(r);" % v)
        elif p.base == "int":
            reads.append("int n%d;" % i)
            reads.append("int *%s = (int *)recread_ints(r, &n%d);" % (v, i))
        elif p.base == "MPI_Aint" and p.array:
            reads.append("int n%d;" % i)
            reads.append("MPI_Aint *%s = (MPI_Aint *)recread_aints(r, &n%d);" % (v, i))
        elif p.base in ("MPI_Aint", "MPI_Count", "MPI_Offset"):
            reads.append("%s %s = (%s)recread_u64(r);" % (p.base, v, p.base))
        else:
            reads.append("void *%s = (void *)(uintptr_t)recread_u64(r);" % v)
        args.append(v)
    made = f.params[-1]
    args.append("(%s *)real" % made.base)
    flags = "0"
    if f.kind == "persistent":
        flags = "VH_PERSISTENT | " + req_kind(f).replace("dest", "a3").replace("source", "a3")
    body = reads + [
        "if (r->bad)",
        "\treturn -EBADMSG;",
        "*flags = %s;" % flags,
        "return PMPI_%s(%s) == MPI_SUCCESS ? 0 : -EINVAL;" % (f.name, ", ".join(args)),
    ]
    return "\nstatic int replay_%s(struct rec_reader *r, void **real, uint32_t *flags)\n{\n%s\n}\n" % (
        f.name, indent(body))


def emit_recorded(funcs):
    recorded = [f for f in funcs if f.kind in ("type_new", "persistent")]
    if not any(f.name == "Type_dup" for f in recorded):
        raise SystemExit("calls.def: Type_dup must be type_new (mpi_adopt records with it)")
    out = ["\n/* --- calls recorded by their arguments -------------------------------- */\n"]
    out.append("enum recorded_call {\n" + "".join(
        "\tCALL_%s = %d,\n" % (f.name, i + 1) for i, f in enumerate(recorded)) + "};\n")
    for f in recorded:
        out.append(emit_recorder(f))
        out.append(emit_replayer(f))
    out.append("\nint mpi_replay_call(struct mpi_record *rec, void **real, uint32_t *flags)\n{\n"
               "\tstruct rec_reader r = recread_open(rec->data, rec->len);\n"
               "\tint ret;\n\n\tswitch (recread_int(&r)) {\n")
    for f in recorded:
        out.append("\tcase CALL_%s:\n\t\tret = replay_%s(&r, real, flags);\n\t\tbreak;\n" %
                   (f.name, f.name))
    out.append("\tdefault:\n\t\tret = -EBADMSG;\n\t}\n\trecread_done(&r);\n\treturn ret;\n}\n")
    return "".join(out)


def trampoline_set(name, params, args, call, array_type, array, slots):
    """slots functions name_<i>(params) calling call(i, args), and the array
    of them (sized by the macro of callbacks.h)."""
    macro = {OP_SLOTS: "MPI_OP_SLOTS", ERRHANDLER_SLOTS: "MPI_ERRHANDLER_SLOTS"}[slots]
    out = ["static void %s_%d(%s)\n{\n\t%s(%d, %s);\n}\n" % (name, i, params, call, i, args)
           for i in range(slots)]
    out.append("\n%s *const %s[%s] = {\n" % (array_type, array, macro) +
               "".join("\t%s_%d,\n" % (name, i) for i in range(slots)) + "};\n")
    return "".join(out)


def emit_trampolines():
    return "".join([
        "\n/* --- trampolines: one per slot (callbacks.h) ------------------------------ */\n",
        trampoline_set("op", "void *a, void *b, int *n, MPI_Datatype *t", "a, b, n, t",
                       "mpi_op_call", "MPI_User_function", "mpi_op_trampolines", OP_SLOTS),
        trampoline_set("eh", "MPI_Comm *c, int *e, ...", "c, e", "mpi_errhandler_call",
                       "MPI_Comm_errhandler_function", "mpi_errhandler_trampolines",
                       ERRHANDLER_SLOTS),
        # The Fortran bindings' (callbacks_f.c): every argument by reference.
        trampoline_set("fop", "void *a, void *b, MPI_Fint *n, MPI_Fint *t", "a, b, n, t",
                       "mpi_fop_call", "mpi_fortran_op_fn", "mpi_fop_trampolines", OP_SLOTS),
        trampoline_set("feh", "MPI_Fint *c, MPI_Fint *e, ...", "c, e", "mpi_feh_call",
                       "mpi_fortran_eh_fn", "mpi_feh_trampolines", ERRHANDLER_SLOTS),
    ])


def write_recorders_h(path, ordered):
    """recorders.h: the prototypes of the recorders."""
    with open(path, "w") as fp:
        fp.write("/* Generated by gen_wrappers.py: the recorders of the calls recorded by\n"
                 " * their arguments (calls.def kinds type_new and persistent). */\n"
                 "#ifndef STASIS_MPI_RECORDERS_H\n#define STASIS_MPI_RECORDERS_H\n\n"
                 "#include <mpi.h>\n\n#include \"record.h\"\n\n")
        for f in ordered:
            if f.kind in ("type_new", "persistent"):
                fp.write("void mpi_record_%s(struct rec_builder *b, %s);\n" %
                         (f.name, ", ".join(p.text for p in f.params[:-1])))
        fp.write("\n#endif\n")
