#!/usr/bin/env python3
"""Generate stasis's MPI wrappers from the MPI library's own mpi.h and the
classification table calls.def (DESIGN.md section 10).

Usage: gen_wrappers.py mpi.h calls.def wrappers.c unsupported.txt recorders.h

For every function of mpi.h: a C wrapper MPI_<Name> calling PMPI_<Name>, and
(for those the Fortran bindings have) a Fortran wrapper mpi_<name>_ calling
the bindings' own, which call PMPI_ themselves. Each wrapper raises
stasis_depth around the real call (allocations made then are the
runtime's), translates the program's virtual handles to the real ones on
the way in and back on the way out (mpi/handles.h), and runs the hooks of
its kind. Functions that are safe and take no handle get no wrapper.
Functions missing from the table get an "unknown" wrapper that switches
checkpoints off. Also written: the recorders and replayers of the calls
recorded by their arguments (datatypes, persistent requests), the
trampolines of user ops and error handlers, and the list of what is not
supported (stasis-run --unsupported).
"""
import re
import sys

from gen_f08 import emit_f08, f08_wrapped
from gen_recorded import emit_recorded, emit_trampolines, write_recorders_h
from gen_table import (ARRAY_BUF, HANDLES, NULLS, has_fortran, indent, len_expr,
                       parse_header, parse_table, req_kind)

# --- hooks shared by both languages -------------------------------------------
# Hook code refers to parameters by their C names: in a C wrapper they are the
# parameters; in a Fortran wrapper, locals of the same names hold C values.
# r_<name> is the real C handle of a handle parameter.

def recv_hook(f, ann):
    fields = ann.split(":")
    if len(fields) not in (3, 4) or (len(fields) == 4 and fields[3] != "root"):
        raise SystemExit("calls.def: MPI_%s: bad recv=%s" % (f.name, ann))
    buf, count, dtype = fields[:3]
    f.param(buf)
    f.param(dtype)
    dtype = "r_" + dtype
    if "@" in count:
        counts, displs = count.split("@")
        call = "traffic_recv_blocks(%s, %s, %s, %s, r_comm);" % (buf, counts, displs, dtype)
    elif count.endswith("[rank]"):
        call = "traffic_recv_my_block(%s, %s, %s, r_comm);" % (buf, count[:-6], dtype)
    else:
        per_rank = count.endswith("*size")
        count = count[:-5] if per_rank else count
        call = "traffic_recv_collective(%s, %s, %s, r_comm, %s);" % (
            buf, count, dtype, "true" if per_rank else "false")
        if f.kind in ("recv", "irecv", "sendrecv", "mrecv") or not any(
                p.name == "comm" for p in f.params):
            call = "traffic_recv_buffer(%s, %s, %s);" % (buf, count, dtype)
    if len(fields) == 4:
        call = "if (traffic_root_prepares(r_comm, root))\n\t\t%s" % call
    return call


def record_args(f, fortran):
    """Arguments of the generated recorder: every parameter but the object
    made, as C values (virtual handles)."""
    out = []
    for p in f.params[:-1]:
        if p.handle_scalar():
            out.append("v_" + p.name if fortran else p.name)
        elif p.handle_array():
            out.append("(const %s *)v_%s" % (p.base, p.name) if fortran else p.name)
        else:
            out.append(p.name)
    return ", ".join(out)


def done_expr(f, fortran, i):
    """Whether the Wait/Test call completed request i (persistent ones)."""
    how = f.ann.get("complete")
    ok = "(*ierr == MPI_SUCCESS)" if fortran else "(ret == MPI_SUCCESS)"
    flag = "(*(MPI_Fint *)flag_f != 0)" if fortran else "(*flag != 0)"
    base = " - 1" if fortran else ""
    index = "(*(MPI_Fint *)index_f%s)" % base if fortran else "(*index)"
    if how in ("wait", "waitall"):
        return ok
    if how in ("test", "testall"):
        return "(%s && %s)" % (ok, flag)
    if how == "waitany":
        return "(%s && %s == %s)" % (ok, index, i)
    if how == "testany":
        return "(%s && %s && %s == %s)" % (ok, flag, index, i)
    if how in ("waitsome", "testsome"):
        outcount = "*(MPI_Fint *)outcount_f" if fortran else "*outcount"
        indices = "(const int *)array_of_indices_f" if fortran else "array_of_indices"
        return "(%s && mpi_index_in(%s, %s, %s%s))" % (ok, indices, outcount, i,
                                                       " + 1" if fortran else "")
    if how == "none":
        return "false"
    raise SystemExit("calls.def: MPI_%s: complete=%s?" % (f.name, how))


class Wrapper:
    """The pieces of one wrapper, in one language."""

    def __init__(self, f, fortran):
        self.f = f
        self.fortran = fortran
        self.decls = []
        self.pre = []
        self.translate = []
        self.hooks = []
        self.post = []
        self.cleanup = []
        self.args = []
        self.uses_out = False

    @property
    def ok(self):
        return "(*ierr == MPI_SUCCESS)" if self.fortran else "(ret == MPI_SUCCESS)"


def comm_expr(fortran, name):
    """The program's C handle of communicator parameter name."""
    if fortran:
        return "(MPI_Comm)vh_f2c(VH_COMM, *(MPI_Fint *)%s_f)" % name
    return name


def file_expr(fortran, name):
    """The program's C handle of file parameter name."""
    if fortran:
        return "(MPI_File)vh_f2c(VH_FILE, *(MPI_Fint *)%s_f)" % name
    return name


def win_expr(fortran, name):
    """The program's C handle of window parameter name."""
    if fortran:
        return "(MPI_Win)vh_f2c(VH_WIN, *(MPI_Fint *)%s_f)" % name
    return name


TEST_LIKE = ("Test", "Testall", "Testany", "Testsome", "Iprobe", "Improbe")


def coord_pre(f, w):
    """Where the coordinator (coord.h) looks in: every wrapper polls; a
    Test or an Iprobe is a place to stop; a collective is counted on its
    communicator (collective_counts.h) and may wait at its entry. (A
    blocking point-to-point call always runs as its non-blocking form plus
    a loop of Tests: emit_blocking.)"""
    fortran = w.fortran
    w.pre.append("coord_wait_point();" if f.name in TEST_LIKE else "coord_entry();")
    if "epoch" in f.ann:
        # Opens an epoch other ranks' calls must meet: where a rank may
        # stop, before the handles are translated (windows.h).
        w.pre.append("windows_opening();")
    if "gate" in f.ann:
        # A collective on a file or a window: counted on the communicator
        # stasis keeps for it (mpiio.h, windows.h).
        gp = f.param(f.ann["gate"])
        if gp.base == "MPI_Win":
            comm = "windows_comm(%s)" % win_expr(fortran, gp.name)
        else:
            comm = "mpiio_comm(%s)" % file_expr(fortran, f.ann["gate"])
        w.pre.append("coord_collective(%s);" % comm)
        w.post.insert(0, "coord_collective_done(%s);" % comm)
    if "igate" in f.ann:
        # A non-blocking collective on a file: counted as one on the
        # file's communicator, its request pending until it completes.
        w.pre.append("coord_icollective(mpiio_comm(%s));" % file_expr(fortran, f.ann["igate"]))
    over = {"collective": "comm", "icollective": "comm", "comm_new": f.ann.get("over")}.get(f.kind)
    if "ungated" in f.ann:
        if over != "none":
            raise SystemExit("calls.def: MPI_%s: ungated needs over=none" % f.name)
        w.pre.append("coord_ungated();")
        w.post.insert(0, "coord_ungated_done();")
    elif over and over != "none":
        f.param(over)
        if f.kind == "icollective":
            w.pre.append("coord_icollective(%s);" % comm_expr(fortran, over))
        else:
            w.pre.append("coord_collective(%s);" % comm_expr(fortran, over))
            w.post.insert(0, "coord_collective_done(%s);" % comm_expr(fortran, over))
    take_done(f, w)


def converted(f, fortran, block):
    """The call as its non-blocking form plus a loop (blocking.h)."""
    names = [p.name for p in f.params]
    if block == "conv":
        if fortran:
            args = ", ".join(n + "_f" for n in names) + ", ierr"
            return "mpi_conv_%s_f(%s);" % (f.name.lower(), args)
        return "ret = mpi_conv_%s(%s);" % (f.name, ", ".join(names))
    if block != "I":
        raise SystemExit("calls.def: MPI_%s: block=%s?" % (f.name, block))
    iname = "I" + f.name[0].lower() + f.name[1:]
    status = "status" if "status" in names else None
    args = [n for n in names if n != "status"]
    if fortran:
        st = "status_f" if status else "MPI_F_STATUS_IGNORE"
        return ("MPI_Fint b_ = 0;\n\n\tmpi_%s_(%s, &b_, ierr);\n"
                "\tif (*ierr == MPI_SUCCESS)\n\t\tblocking_wait_f(&b_, %s, ierr);" %
                (iname.lower(), ", ".join(a + "_f" for a in args), st))
    st = status or "MPI_STATUS_IGNORE"
    return ("MPI_Request b_ = MPI_REQUEST_NULL;\n\n\tret = MPI_%s(%s, &b_);\n"
            "\tif (ret == MPI_SUCCESS)\n\t\tret = blocking_wait(&b_, %s);" %
            (iname, ", ".join(args), st))


def take_done(f, w):
    """Requests stasis completed during a checkpoint are complete: the
    Waitany/Waitsome family returns one of them first."""
    how = f.ann.get("complete")
    if how not in ("waitany", "testany", "waitsome", "testsome"):
        return
    w.uses_out = True
    n = "count" if how.endswith("any") else "incount"
    if w.fortran:
        reqs, cnt = "(MPI_Fint *)array_of_requests_f", "*(MPI_Fint *)%s_f" % n
        if how.endswith("any"):
            flag = "\n\t\t*(MPI_Fint *)flag_f = 1;" if how == "testany" else ""
            w.pre.append("if (mpi_req_take_done_f(%s, %s, (MPI_Fint *)index_f, (MPI_Fint *)status_f)) {%s"
                         "\n\t\t*ierr = MPI_SUCCESS;\n\t\tgoto out;\n\t}" % (reqs, cnt, flag))
        else:
            w.pre.append("if (mpi_req_take_done_f(%s, %s, (MPI_Fint *)array_of_indices_f, "
                         "(MPI_Fint *)array_of_statuses_f == MPI_F_STATUSES_IGNORE ? "
                         "MPI_F_STATUS_IGNORE : (MPI_Fint *)array_of_statuses_f)) {"
                         "\n\t\t*(MPI_Fint *)outcount_f = 1;\n\t\t*ierr = MPI_SUCCESS;"
                         "\n\t\tgoto out;\n\t}" % (reqs, cnt))
        return
    if how.endswith("any"):
        flag = "\n\t\t*flag = 1;" if how == "testany" else ""
        w.pre.append("if (mpi_req_take_done(array_of_requests, count, index, status)) {%s"
                     "\n\t\tret = MPI_SUCCESS;\n\t\tgoto out;\n\t}" % flag)
    else:
        w.pre.append("if (mpi_req_take_done(array_of_requests, incount, &array_of_indices[0], "
                     "array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : "
                     "&array_of_statuses[0])) {\n\t\t*outcount = 1;\n\t\tret = MPI_SUCCESS;"
                     "\n\t\tgoto out;\n\t}")


def status_of(f, fortran, i):
    """Where the status of request i of a Wait/Test call goes."""
    how = f.ann.get("complete")
    if fortran:
        if how in ("wait", "test"):
            return "(MPI_Fint *)status_f"
        if how in ("waitall", "testall"):
            return ("((MPI_Fint *)array_of_statuses_f == MPI_F_STATUSES_IGNORE ? "
                    "MPI_F_STATUS_IGNORE : (MPI_Fint *)array_of_statuses_f + %s * F_STATUS_SIZE)" % i)
        return "MPI_F_STATUS_IGNORE"
    if how in ("wait", "test"):
        return "status"
    if how in ("waitall", "testall"):
        return ("(array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : "
                "&array_of_statuses[%s])" % i)
    return "MPI_STATUS_IGNORE"


def out_value(f, p, fortran, real):
    """The program's value for a handle MPI returned through p."""
    k = p.kind
    call = '"%s"' % f.full
    sfx = "_f" if fortran else ""
    if f.kind in ("unsupported", "unknown"):
        return real
    if f.kind == "comm_new":
        split = f.ann.get("split", "MPI_UNDEFINED")
        return "mpi_comm_new%s(%s, %s, %s)" % (sfx, real, split, call)
    if k == "VH_GROUP":
        return "mpi_group_new%s(%s, %s)" % (sfx, real, call)
    if k == "VH_INFO":
        return "mpi_info_new%s(%s, %s)" % (sfx, real, call)
    if f.kind == "type_new":
        return "mpi_type_new%s(%s, &rec_, %s)" % (sfx, real, call)
    comm = comm_expr(fortran, "comm")
    if f.kind == "persistent":
        peer = "dest" if "send" in f.name.lower() else "source"
        return "mpi_req_persistent%s(%s, %s, %s, %s, &rec_, %s)" % (
            sfx, real, req_kind(f), comm, peer, call)
    if k == "VH_REQUEST":
        if f.kind == "isend":
            return "mpi_req_new%s(%s, %s, %s, dest)" % (sfx, real, req_kind(f), comm)
        if f.kind == "icollective":
            return "mpi_req_new%s(%s, VH_COLL, %s, MPI_PROC_NULL)" % (sfx, real, comm)
        if f.kind == "irecv":
            if fortran:
                return ("mpi_req_recv_f(%s, buf, count, *(MPI_Fint *)datatype_f, source, tag, "
                        "*(MPI_Fint *)comm_f)" % real)
            return "mpi_req_recv(%s, buf, count, datatype, source, tag, comm)" % real
        if f.kind == "mrecv":
            src = "m_ == MPI_MESSAGE_NO_PROC ? MPI_PROC_NULL : MPI_ANY_SOURCE"
            if fortran:
                return ("mpi_req_recv_f(%s, buf, count, *(MPI_Fint *)type_f, %s, MPI_ANY_TAG, 0)"
                        % (real, src))
            return ("mpi_req_recv(%s, buf, count, type, %s, MPI_ANY_TAG, MPI_COMM_NULL)" %
                    (real, src))
        if "igate" in f.ann:
            return "mpi_req_new%s(%s, VH_COLL, mpiio_comm(%s), MPI_PROC_NULL)" % (
                sfx, real, file_expr(fortran, f.ann["igate"]))
        if "freq" in f.ann:
            # Non-blocking independent file I/O: a request the drain
            # completes (it has no peer: nothing is counted).
            return "mpi_req_new%s(%s, mpi_req_kind(VH_SEND, MPI_PROC_NULL), MPI_COMM_NULL, " \
                   "MPI_PROC_NULL)" % (sfx, real)
        return real  # a window's or a file's request: not one of ours
    cast = "" if fortran else "(%s)" % p.base
    return "%smpi_adopt%s(%s, %s, %s)" % (cast, sfx, k, real, call)


def build(f, fortran):
    w = Wrapper(f, fortran)
    kind = f.kind
    call = '"%s"' % f.full
    # Which handle pointer an in/out kind works on.
    inout = {"free": f.ann.get("free"), "commit": "type", "reqfree": "request"}.get(kind)
    if kind in ("complete", "start") and not f.params[0].array:
        inout = "request"
    if fortran:
        for p in f.params:
            if p.handle_scalar() or p.handle_ptr() or p.handle_array():
                continue
            if p.keyval and p.ptr == 0:
                continue
            if p.base == "int" and p.ptr == 0 and not p.array:
                w.decls.append("int %s = *(MPI_Fint *)%s_f;" % (p.name, p.name))
            elif p.base in ("MPI_Aint", "MPI_Count", "MPI_Offset") and p.ptr == 0 and not p.array:
                w.decls.append("%s %s = *(%s *)%s_f;" % (p.base, p.name, p.base, p.name))
            elif p.base in ("int", "MPI_Aint") and not p.keyval:
                w.decls.append("%s *%s = (%s *)%s_f;" % (p.base, p.name, p.base, p.name))
            elif p.base == "void":
                w.decls.append("void *%s = %s_f;" % (p.name, p.name))
    # unknown calls, the coordinator: before anything is translated
    if kind == "unknown":
        w.pre.append("mpi_unknown(%s);" % call)
    coord_pre(f, w)
    # handle parameters: scalars first (array lengths may use them)
    scalars = [p for p in f.params if p.handle_scalar() or (p.keyval and p.ptr == 0)]
    order = scalars + [p for p in f.params if p not in scalars]
    args = {}
    nscalar = None
    for p in order:
        if nscalar is None and p not in scalars:
            nscalar = len(w.translate)
        n = p.name
        pf = n + "_f"
        if p.keyval and p.ptr == 0 and not p.array:
            if fortran:
                w.decls.append("MPI_Fint rf_%s;" % n)
                w.translate.append("rf_%s = vh_real_keyval(*(MPI_Fint *)%s);" % (n, pf))
                args[p.name] = ("&rf_" + n)
            else:
                w.translate.append("int r_%s = vh_real_keyval(%s);" % (n, n))
                args[p.name] = ("r_" + n)
            continue
        if p.keyval and p.ptr == 1 and kind == "free":
            if fortran:
                w.decls.append("MPI_Fint rf_%s, old_%s = *(MPI_Fint *)%s;" % (n, n, pf))
                w.translate.append("rf_%s = vh_real_keyval(old_%s);" % (n, n))
                # held while an attribute uses it (keyvals.h)
                w.translate.append("if (keyval_hold(old_%s, &rf_%s)) {\n\t\t*(MPI_Fint *)%s = MPI_KEYVAL_INVALID;"
                                   "\n\t\t*ierr = MPI_SUCCESS;\n\t\tgoto out;\n\t}" % (n, n, pf))
                w.uses_out = True
                args[p.name] = ("&rf_" + n)
                w.post.append("if %s {\n\t\tmpi_keyval_freed(old_%s);\n\t\t*(MPI_Fint *)%s = rf_%s;\n\t}"
                              % (w.ok, n, pf, n))
            else:
                w.translate.append("int old_%s = *%s, r_%s = vh_real_keyval(old_%s);" % (n, n, n, n))
                w.translate.append("if (keyval_hold(old_%s, &r_%s)) {\n\t\t*%s = MPI_KEYVAL_INVALID;"
                                   "\n\t\tret = MPI_SUCCESS;\n\t\tgoto out;\n\t}" % (n, n, n))
                w.uses_out = True
                args[p.name] = ("&r_" + n)
                w.post.append("if %s {\n\t\tmpi_keyval_freed(old_%s);\n\t\t*%s = r_%s;\n\t}"
                              % (w.ok, n, n, n))
            continue
        if not p.kind:
            args[p.name] = (pf if fortran else n)
            continue
        k = p.kind
        T = p.base
        if p.handle_scalar():
            if fortran:
                w.decls.append("MPI_Fint rf_%s;" % n)
                w.translate.append("rf_%s = vh_real_f(%s, *(MPI_Fint *)%s);" % (n, k, pf))
                args[p.name] = ("&rf_" + n)
            else:
                w.translate.append("%s r_%s = VH_REAL(%s, %s, %s);" % (T, n, k, T, n))
                args[p.name] = ("r_" + n)
        elif p.handle_array():
            length = len_expr(f, p)
            out_array = not p.const and kind == "safe"
            if fortran:
                w.decls.append("MPI_Fint rf_%s_buf[%d], *rf_%s = NULL;" % (n, ARRAY_BUF, n))
                if out_array:
                    w.translate.append(
                        "rf_%s = mpi_f_out_array(%s_f, %s, rf_%s_buf, %d, %s);" %
                        (n, n, length, n, ARRAY_BUF, k))
                else:
                    w.translate.append(
                        "rf_%s = vh_real_f_array(%s, (const MPI_Fint *)%s, %s, rf_%s_buf, %d);" %
                        (n, k, pf, length, n, ARRAY_BUF))
                w.translate.append("if (%s_f && !rf_%s) {\n\t\t*ierr = MPI_ERR_NO_MEM;\n\t\tgoto out;\n\t}" % (n, n))
                args[p.name] = ("rf_" + n)
                w.cleanup.append("vh_array_done(rf_%s, rf_%s_buf);" % (n, n))
            else:
                w.decls.append("%s r_%s_buf[%d], *r_%s = NULL;" % (T, n, ARRAY_BUF, n))
                if out_array:
                    w.translate.append("r_%s = mpi_out_array((void **)r_%s_buf, %d, %s, %s);" %
                                       (n, n, ARRAY_BUF, length, k))
                else:
                    w.translate.append(
                        "r_%s = (%s *)vh_real_array(%s, (void *const *)%s, %s, (void **)r_%s_buf, %d);"
                        % (n, T, k, n, length, n, ARRAY_BUF))
                w.translate.append("if (%s && !r_%s) {\n\t\tret = MPI_ERR_NO_MEM;\n\t\tgoto out;\n\t}" % (n, n))
                args[p.name] = ("r_" + n)
                w.cleanup.append("vh_array_done(r_%s, r_%s_buf);" % (n, n))
            w.uses_out = True
            if kind == "complete":
                if fortran:
                    w.post.append("for (int i = 0; rf_%s && i < %s; i++)\n\t\tmpi_req_settle_f((MPI_Fint *)%s + i, rf_%s[i], %s, %s);"
                                  % (n, length, pf, n, done_expr(f, True, "i"), status_of(f, True, "i")))
                else:
                    w.post.append("for (int i = 0; r_%s && i < %s; i++)\n\t\tmpi_req_settle(&%s[i], r_%s[i], %s, %s);"
                                  % (n, length, n, n, done_expr(f, False, "i"), status_of(f, False, "i")))
            elif kind == "start":
                if fortran:
                    w.post.append("for (int i = 0; %s && i < %s; i++)\n\t\tmpi_req_started_f(((MPI_Fint *)%s)[i]);"
                                  % (w.ok, length, pf))
                else:
                    w.post.append("for (int i = 0; %s && i < %s; i++)\n\t\tmpi_req_started(%s[i]);"
                                  % (w.ok, length, n))
            elif out_array:
                if fortran:
                    w.post.append("for (int i = 0; %s && i < %s; i++)\n\t\t((MPI_Fint *)%s)[i] = mpi_adopt_f(%s, rf_%s[i], %s);"
                                  % (w.ok, length, pf, k, n, call))
                else:
                    w.post.append("for (int i = 0; %s && i < %s; i++)\n\t\t%s[i] = mpi_adopt(%s, r_%s[i], %s);"
                                  % (w.ok, length, n, k, n, call))
            elif fortran and f.kind == "type_new":
                w.decls.append("void *v_%s_buf[%d], **v_%s = NULL;" % (n, ARRAY_BUF, n))
                w.translate.append("v_%s = vh_f2c_array(%s, (const MPI_Fint *)%s, %s, v_%s_buf, %d);"
                                   % (n, k, pf, length, n, ARRAY_BUF))
                w.translate.append("if (%s && !v_%s) {\n\t\t*ierr = MPI_ERR_NO_MEM;\n\t\tgoto out;\n\t}" % (pf, n))
                w.cleanup.append("vh_array_done(v_%s, v_%s_buf);" % (n, n))
        elif p.handle_ptr():
            if n == inout:
                if fortran:
                    w.decls.append("MPI_Fint rf_%s, old_%s = *(MPI_Fint *)%s;" % (n, n, pf))
                    w.translate.append("rf_%s = vh_real_f(%s, old_%s);" % (n, k, n))
                else:
                    w.translate.append("%s old_%s = *%s, r_%s = VH_REAL(%s, %s, old_%s);" %
                                       (T, n, n, n, k, T, n))
                args[p.name] = ("&rf_" + n if fortran else "&r_" + n)
                old = "old_" + n
                if kind == "free":
                    if fortran:
                        w.post.append("if %s {\n\t\tmpi_freed_f(%s, %s);\n\t\t*(MPI_Fint *)%s = rf_%s;\n\t}"
                                      % (w.ok, k, old, pf, n))
                    else:
                        w.post.append("if %s {\n\t\tmpi_freed(%s, %s);\n\t\t*%s = %s;\n\t}"
                                      % (w.ok, k, old, n, NULLS[k]))
                elif kind == "commit":
                    w.post.append("if %s\n\t\tmpi_type_committed%s(%s);" % (w.ok, "_f" if fortran else "", old))
                elif kind == "reqfree":
                    if fortran:
                        w.post.append("if %s\n\t\tmpi_req_freed_f((MPI_Fint *)%s);" % (w.ok, pf))
                    else:
                        w.post.append("if %s\n\t\tmpi_req_freed(%s);" % (w.ok, n))
                elif kind == "start":
                    w.post.append("if %s\n\t\tmpi_req_started%s(%s);" % (w.ok, "_f" if fortran else "", old))
                elif kind == "complete":
                    if fortran:
                        w.post.append("mpi_req_settle_f((MPI_Fint *)%s, rf_%s, %s, %s);"
                                      % (pf, n, done_expr(f, True, "0"), status_of(f, True, "0")))
                    else:
                        w.post.append("mpi_req_settle(%s, r_%s, %s, %s);"
                                      % (n, n, done_expr(f, False, "0"), status_of(f, False, "0")))
            else:
                if fortran:
                    w.decls.append("MPI_Fint rf_%s = 0;" % n)
                    args[p.name] = ("&rf_" + n)
                    w.post.append("if %s\n\t\t*(MPI_Fint *)%s = %s;" %
                                  (w.ok, pf, out_value(f, p, True, "rf_" + n)))
                else:
                    w.decls.append("%s r_%s = %s;" % (T, n, NULLS[k]))
                    args[p.name] = ("&r_" + n)
                    w.post.append("if %s\n\t\t*%s = %s;" % (w.ok, n, out_value(f, p, False, "r_" + n)))
        else:
            raise SystemExit("MPI_%s: cannot handle parameter %s" % (f.name, p.text))
    w.args = [args[p.name] for p in f.params]
    kind_hooks(f, w)
    if fortran:
        # The real C handles the C hooks and array lengths use.
        if nscalar is None:
            nscalar = len(w.translate)
        code = "\n".join(w.translate[nscalar:] + w.hooks)
        for p in reversed(scalars):
            if p.kind and re.search(r"\br_%s\b" % p.name, code):
                w.translate.insert(nscalar, "%s r_%s = (%s)vh_real_f2c(%s, rf_%s);" %
                                   (p.base, p.name, p.base, p.kind, p.name))
    return w


def kind_hooks(f, w):
    kind = f.kind
    call = '"%s"' % f.full
    ok = w.ok
    fortran = w.fortran
    for key, value in f.ann.items():
        if key == "recv":
            w.hooks.append(recv_hook(f, value))
    if kind in ("send", "isend", "sendrecv"):
        w.post.append("if %s\n\t\ttraffic_sent(%s, dest);" % (ok, comm_expr(fortran, "comm")))
    if kind == "isend":
        # Numbered in its stream while a synchronous send is pending there
        # (mpi/sync_sends.h); an MPI_Issend starts the numbering.
        comm = comm_expr(fortran, "comm")
        if f.name == "Issend":
            req = ("(MPI_Request)vh_f2c(VH_REQUEST, *(MPI_Fint *)request_f)" if fortran
                   else "*request")
            w.post.append("if %s\n\t\tsync_sends_started(%s, %s, dest, tag);" % (ok, req, comm))
        else:
            w.post.append("if %s\n\t\tsync_sends_note(%s, dest, tag);" % (ok, comm))
    if kind in ("recv", "sendrecv"):
        w.post.append("if %s\n\t\ttraffic_received(source);" % ok)
    if kind == "mprobe":
        if fortran:
            msg = "PMPI_Message_f2c(*(MPI_Fint *)message_f)"
            flag = " && *(MPI_Fint *)flag_f" if f.name == "Improbe" else ""
        else:
            msg = "*message"
            flag = " && *flag" if f.name == "Improbe" else ""
        # before translating: it may take a checkpoint (and resume a restart)
        w.pre.append("coord_match_begin();")
        w.post.append("if (%s%s)\n\t\tmpi_message_matched(%s);" % (ok, flag, msg))
        w.post.append("coord_match_end();")
    if kind == "mrecv":
        msg = "PMPI_Message_f2c(*(MPI_Fint *)message_f)" if fortran else "*message"
        w.decls.append("MPI_Message m_ = MPI_MESSAGE_NULL;")
        w.hooks.append("m_ = %s;" % msg)
        w.post.append("if %s\n\t\tmpi_message_received(m_);" % ok)
        if f.name == "Mrecv":
            w.post.append("if (%s && m_ != MPI_MESSAGE_NO_PROC)\n\t\ttraffic_received(0);" % ok)
    if kind in ("type_new", "persistent"):
        w.decls.append("struct rec_builder rec_ = {0};")
        w.hooks.append("mpi_record_%s(&rec_, %s);" % (f.name, record_args(f, fortran)))
        # The recorder's copy is dropped when MPI fails.
        w.post.append("if (!%s) {\n\t\tfree(rec_.data);\n\t\tfree(rec_.parents);\n\t}" % ok)
        if fortran:
            for p in f.params[:-1]:
                if p.handle_scalar():
                    w.decls.append("%s v_%s = (%s)vh_f2c(%s, *(MPI_Fint *)%s_f);" %
                                   (p.base, p.name, p.base, p.kind, p.name))
    if "fwrite" in f.ann:
        fh = file_expr(fortran, "fh")
        how = f.ann["fwrite"]
        # What it writes (count of the real datatype): the bytes an undo
        # record must save first.
        f.param("count")
        f.param("datatype")
        dt = "r_datatype"
        if how == "at":
            f.param("offset")
            w.hooks.append("mpiio_will_write_at(%s, offset, count, %s);" % (fh, dt))
        elif how in ("ind", "shared"):
            w.hooks.append("mpiio_will_write(%s, %s, count, %s);" %
                           (fh, "true" if how == "shared" else "false", dt))
        else:
            raise SystemExit("calls.def: MPI_%s: fwrite=%s?" % (f.name, how))
    if "fcut" in f.ann:
        f.param(f.ann["fcut"])
        w.hooks.append("mpiio_will_cut(%s, %s);" % (file_expr(fortran, "fh"), f.ann["fcut"]))
    if "winop" in f.ann:
        # An RMA operation: the window's epoch has work to complete
        # (windows.h).
        w.hooks.append("windows_op(%s);" % win_expr(fortran, "win"))
    if "win" in f.ann:
        # A synchronisation call that succeeded: the window's epoch state.
        fields = f.ann["win"].split(":")
        args = [win_expr(fortran, "win")]
        for a in fields[1:]:
            f.param(a)
            args.append(a)
        while len(args) < 3:
            args.append("0")
        w.post.append("if %s\n\t\twindows_%s(%s);" % (ok, fields[0], ", ".join(args)))
    if "epoch" in f.ann:
        kind = {"access": "WIN_ACCESS", "exposure": "WIN_EXPOSURE"}.get(f.ann["epoch"])
        if not kind:
            raise SystemExit("calls.def: MPI_%s: epoch=%s?" % (f.name, f.ann["epoch"]))
        w.post.append("windows_opened(%s, %s, %s);" % (win_expr(fortran, "win"), ok, kind))
    if "rwait" in f.ann:
        # A request-based RMA operation: completed here (locally, as its
        # wait would), so that no request of a window's outlives the call
        # and none is left for a checkpoint to carry; the program gets
        # MPI_REQUEST_NULL, which its wait or test completes at once.
        if fortran:
            w.post.append("if %s {\n\t\tMPI_Request q_ = PMPI_Request_f2c(*(MPI_Fint *)request_f);"
                          "\n\n\t\tPMPI_Wait(&q_, MPI_STATUS_IGNORE);"
                          "\n\t\t*(MPI_Fint *)request_f = PMPI_Request_c2f(q_);\n\t}" % ok)
        else:
            w.post.append("if %s\n\t\tret = PMPI_Wait(request, MPI_STATUS_IGNORE);" % ok)
    if kind == "buffer_attach":
        w.post.append("if %s\n\t\tmpi_buffer_attached(buffer, size);" % ok)
    if kind == "buffer_detach":
        w.post.append("if %s\n\t\tmpi_buffer_detached();" % ok)
    if kind == "unsupported":
        w.post.append("if %s\n\t\tsession_unsupported(%s);" % (ok, call))


def emit_blocking(f, fortran):
    """A blocking point-to-point call: its non-blocking form and a loop
    (blocking.h), through stasis's own wrappers, which translate and count."""
    body = converted(f, fortran, f.ann["block"])
    if fortran:
        sym = fortran_name(f)
        fparams = ["void *%s_f" % p.name for p in f.params] + ["MPI_Fint *ierr"]
        out = ("\nEXPORT void %s(%s)\n{\n\tstasis_depth++;\n\tcoord_entry();\n\t%s\n"
               "\tstasis_depth--;\n}\n" % (sym, ", ".join(fparams), body))
        return out + "FORTRAN_ALIASES(%s, %s)\n" % (sym[:-1], "MPI_" + f.name.upper())
    params = ", ".join(p.text for p in f.params)
    return ("\nEXPORT int MPI_%s(%s)\n{\n\tint ret;\n\n\tstasis_depth++;\n\tcoord_entry();\n"
            "\t%s\n\tstasis_depth--;\n\treturn ret;\n}\n" % (f.name, params, body))


def emit_c(f):
    if f.ann.get("block"):
        return emit_blocking(f, False)
    w = build(f, False)
    params = ", ".join(p.text for p in f.params) or "void"
    args = ", ".join(w.args)
    body = ["int ret;"] + w.decls + ["", "stasis_depth++;"] + w.pre + w.translate + w.hooks
    body.append("ret = PMPI_%s(%s);" % (f.name, args))
    body += w.post
    if w.uses_out or w.cleanup:
        body.append("goto out;")
        body.append("out:")
    body += w.cleanup
    body += ["stasis_depth--;", "return ret;"]
    return "\nEXPORT int MPI_%s(%s)\n{\n%s\n}\n" % (f.name, params, indent(body))


def fortran_name(f):
    return "mpi_%s_" % f.name.lower()


def fortran_proto(f):
    """The prototype of f's Fortran wrapper, for calls between wrappers."""
    args = ["void *"] * len(f.params) + ["MPI_Fint *"] + ["size_t"] * sum(
        1 for p in f.params if p.is_char())
    return "void %s(%s);\n" % (fortran_name(f), ", ".join(args))


def emit_fortran(f):
    if f.ann.get("block"):
        return emit_blocking(f, True)
    w = build(f, True)
    sym = fortran_name(f)
    fparams = ["void *%s_f" % p.name for p in f.params] + ["MPI_Fint *ierr"]
    lens = ["size_t %s_len" % p.name for p in f.params if p.is_char()]
    ftypes = ["void *"] * len(f.params) + ["MPI_Fint *"] + ["size_t"] * len(lens)
    args = w.args + ["ierr"] + [l.split()[1] for l in lens]
    body = ["static void (*real)(%s);" % ", ".join(ftypes)] + w.decls + ["", "stasis_depth++;"]
    body += w.pre + w.translate + w.hooks
    body.append("/* Resolved here: a restart resumes in the hooks above, in a process")
    body.append(" * where this static was never set. */")
    body.append("if (!real)\n\t\treal = stasis_next_symbol(\"%s\");" % sym)
    body.append("real(%s);" % ", ".join(args))
    body += w.post
    if w.uses_out or w.cleanup:
        body.append("goto out;")
        body.append("out:")
    body += w.cleanup
    body.append("stasis_depth--;")
    upper = "MPI_" + f.name.upper()
    out = "\nEXPORT void %s(%s)\n{\n%s\n}\n" % (sym, ", ".join(fparams + lens), indent(body))
    out += "FORTRAN_ALIASES(%s, %s)\n" % (sym[:-1], upper)
    return out


def emit_conversion(f):
    p = f.params[0]
    if f.kind == "c2f":
        k = HANDLES.get(p.base)
        if not k:
            return ""
        return "\nEXPORT MPI_Fint MPI_%s(%s)\n{\n\treturn vh_c2f(%s, %s);\n}\n" % (
            f.name, p.text, k, p.name)
    base = f.ret
    k = HANDLES.get(base)
    if not k:
        return ""
    return "\nEXPORT %s MPI_%s(%s)\n{\n\treturn (%s)vh_f2c(%s, %s);\n}\n" % (
        base, f.name, p.text, base, k, p.name)


HEADER = """/* Generated by gen_wrappers.py from mpi.h and calls.def: do not edit. */
/* mpi.h declares the functions MPI-3 removed only when asked: they are
 * wrapped too, for binaries built against older headers. */
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0
#include <errno.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "callbacks.h"
#include "calls.h"
#include "comms.h"
#include "handles.h"
#include "keyvals.h"
#include "memory.h"
#include "mpiio.h"
#include "export.h"
#include "runtime.h"
#include "record.h"
#include "requests.h"
#include "session.h"
#include "blocking.h"
#include "coord.h"
#include "sync_sends.h"
#include "traffic.h"
#include "windows.h"

/* Fortran count arrays and handles are C ints. */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not an int");

#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-label"
#pragma GCC diagnostic ignored "-Wunused-parameter"
/* The MPI-1 functions MPI-3 removed are wrapped on purpose. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
"""


def needs_wrapper(f):
    if f.kind in ("custom", "custom_c"):
        return False
    if f.kind != "safe":
        return True
    # A safe call needs one only to translate handles.
    return any(p.kind or p.keyval for p in f.params)


def main():
    header, table, out_c, out_list, out_h = sys.argv[1:6]
    funcs = parse_header(header)
    parse_table(table, funcs)
    ordered = [funcs[n] for n in sorted(funcs)]
    out = [HEADER]
    out.append("\n/* The Fortran wrappers below, which call each other. */\n")
    for f in ordered:
        if f.kind not in ("c2f", "f2c", "custom") and has_fortran(f) and (
                needs_wrapper(f) or f.kind == "custom_c"):
            out.append(fortran_proto(f))
    out.append(emit_recorded(ordered))
    for f in ordered:
        if f.kind in ("c2f", "f2c"):
            out.append(emit_conversion(f))
            continue
        if f.kind == "custom_c":
            # Hand-written in C only: the Fortran one just translates.
            f.kind = "safe"
            out.append(emit_fortran(f))
            f.kind = "custom_c"
            continue
        if not needs_wrapper(f):
            continue
        out.append(emit_c(f))
        if has_fortran(f):
            out.append(emit_fortran(f))
    out.append(emit_trampolines())
    out.append(emit_f08([f for f in ordered if has_fortran(f) and f08_wrapped(f, (
        f.kind == "custom_c" or (needs_wrapper(f) and f.kind not in ("c2f", "f2c"))))]))
    with open(out_c, "w") as fp:
        fp.write("".join(out))
    write_recorders_h(out_h, ordered)
    with open(out_list, "w") as fp:
        fp.write("MPI calls that switch checkpoints off (from %s):\n\n" % table.split("/")[-1])
        for what, kind in (("not supported yet", "unsupported"), ("not known", "unknown")):
            names = [f.full for f in ordered if f.kind == kind]
            fp.write("%s (%d):\n" % (what, len(names)))
            for n in names:
                fp.write("  %s\n" % n)
            fp.write("\n")
        known = sum(1 for f in ordered if f.kind not in ("unknown",))
        fp.write("%d of the %d functions of mpi.h are classified.\n" % (known, len(ordered)))


if __name__ == "__main__":
    main()
