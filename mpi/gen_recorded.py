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


def emit_trampolines():
    out = ["\n/* --- trampolines: one per slot (callbacks.h) ------------------------------ */\n"]
    for i in range(OP_SLOTS):
        out.append("static void op_%d(void *a, void *b, int *n, MPI_Datatype *t)\n"
                   "{\n\tmpi_op_call(%d, a, b, n, t);\n}\n" % (i, i))
    out.append("\nMPI_User_function *const mpi_op_trampolines[MPI_OP_SLOTS] = {\n" +
               "".join("\top_%d,\n" % i for i in range(OP_SLOTS)) + "};\n")
    for i in range(ERRHANDLER_SLOTS):
        out.append("static void eh_%d(MPI_Comm *c, int *e, ...)\n"
                   "{\n\tmpi_errhandler_call(%d, c, e);\n}\n" % (i, i))
    out.append("\nMPI_Comm_errhandler_function *const mpi_errhandler_trampolines[MPI_ERRHANDLER_SLOTS] = {\n" +
               "".join("\teh_%d,\n" % i for i in range(ERRHANDLER_SLOTS)) + "};\n")
    return "".join(out)


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
