"""The MPI library's functions and their classification (calls.def), for
the generators of mpi/ (gen_wrappers.py, gen_recorded.py): what mpi.h
declares, parsed into Func and Param, and the kinds the table gives them.
"""
import os
import re
import sys

HANDLES = {
    "MPI_Comm": "VH_COMM",
    "MPI_Group": "VH_GROUP",
    "MPI_Datatype": "VH_TYPE",
    "MPI_Op": "VH_OP",
    "MPI_Request": "VH_REQUEST",
    "MPI_Errhandler": "VH_ERRHANDLER",
    "MPI_Info": "VH_INFO",
    "MPI_File": "VH_FILE",
    "MPI_Win": "VH_WIN",
}
NULLS = {
    "VH_COMM": "MPI_COMM_NULL",
    "VH_GROUP": "MPI_GROUP_NULL",
    "VH_TYPE": "MPI_DATATYPE_NULL",
    "VH_OP": "MPI_OP_NULL",
    "VH_REQUEST": "MPI_REQUEST_NULL",
    "VH_ERRHANDLER": "MPI_ERRHANDLER_NULL",
    "VH_INFO": "MPI_INFO_NULL",
    "VH_FILE": "MPI_FILE_NULL",
    "VH_WIN": "MPI_WIN_NULL",
}
KINDS = {
    "safe", "collective", "icollective", "send", "isend", "recv", "irecv",
    "sendrecv", "mprobe", "mrecv", "persistent", "start", "complete",
    "reqfree", "comm_new", "group_new", "type_new", "info_new", "commit",
    "free", "buffer_attach", "buffer_detach", "c2f", "f2c", "custom",
    "custom_c", "unsupported",
}
ARRAY_BUF = 16
OP_SLOTS = 256
ERRHANDLER_SLOTS = 64


class Param:
    def __init__(self, text):
        self.text = " ".join(text.split())
        m = re.match(r"^(const\s+)?(.*?)\s*(\w+)\s*((?:\[[^\]]*\])*)$", self.text)
        if not m:
            raise SystemExit("cannot parse parameter: " + text)
        self.const = bool(m.group(1))
        typ, self.name, dims = m.group(2), m.group(3), m.group(4)
        self.ptr = typ.count("*")
        self.base = typ.replace("*", "").strip()
        self.array = bool(dims)
        self.dims = dims
        self.kind = HANDLES.get(self.base)
        self.keyval = self.base == "int" and self.name.endswith("keyval")

    def handle_scalar(self):
        return self.kind and not self.array and self.ptr == 0

    def handle_ptr(self):
        return self.kind and not self.array and self.ptr == 1

    def handle_array(self):
        return self.kind and self.array and self.ptr == 0

    def is_char(self):
        return self.base == "char"


class Func:
    def __init__(self, name, ret, params):
        self.name = name          # e.g. Comm_split
        self.ret = ret
        self.params = params
        self.kind = "unknown"
        self.ann = {}
        self.lens = {}

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise SystemExit("calls.def: MPI_%s has no parameter %s" % (self.name, name))

    @property
    def full(self):
        return "MPI_" + self.name


# How each MPI family declares its functions (issue 19), found from mpi.h.
# Open MPI: every prototype in mpi.h, after OMPI_DECLSPEC. MPICH: in the
# headers mpi.h includes (mpi_proto.h, ROMIO's mpio.h), each ended by
# MPICH_API_PUBLIC or ROMIO_API_PUBLIC after any MPICH_ATTR_*(...).
DECLARATIONS = {
    "openmpi": r"OMPI_DECLSPEC\s+([^;{]*?)\b(MPI_\w+)\s*\(([^;]*?)\)\s*[^;]*;",
    "mpich": r"(?:^|\n)[ \t]*([A-Za-z_][\w \t]*?\**)[ \t]*\b(MPI_\w+)\s*\(([^;]*?)\)\s*"
             r"(?:MPICH_ATTR_\w+\s*\([^)]*\)\s*)*(?:MPICH|ROMIO)_API_PUBLIC\s*;",
}
INCLUDED = {"openmpi": (), "mpich": ("mpi_proto.h", "mpio.h")}

# MPICH names 46 functions' parameters otherwise than Open MPI, whose names
# calls.def's annotations and gen_wrappers.py use: MPICH's renamed to those,
# by function (checked against both headers, the test gen-table-mpich).
MPICH_PARAMS = {
    "Buffer_detach": {"buffer_addr": "buffer"},
    "Cart_create": {"comm_old": "old_comm"},
    "Cart_sub": {"newcomm": "new_comm"},
    "Comm_create_errhandler": {"comm_errhandler_fn": "function"},
    "Comm_get_errhandler": {"errhandler": "erhandler"},
    "Dist_graph_create": {"sources": "nodes", "destinations": "targets",
                          "comm_dist_graph": "newcomm"},
    "Dist_graph_neighbors_count": {"indegree": "inneighbors", "outdegree": "outneighbors"},
    "Errhandler_create": {"comm_errhandler_fn": "function"},
    "File_create_errhandler": {"file_errhandler_fn": "function"},
    "Graph_create": {"indx": "index"},
    "Graph_get": {"indx": "index"},
    "Graph_map": {"indx": "index"},
    "Imrecv": {"datatype": "type"},
    "Intercomm_create": {"peer_comm": "bridge_comm"},
    "Intercomm_merge": {"newintracomm": "newintercomm"},
    "Mrecv": {"datatype": "type"},
    "Op_create": {"user_fn": "function"},
    "Rput": {"target_count": "target_cout"},
    "Rsend": {"buf": "ibuf"},
    "T_category_changed": {"update_number": "stamp"},
    "T_category_get_index": {"cat_index": "category_index"},
    "T_enum_get_item": {"indx": "index"},
    "Testany": {"indx": "index"},
    "Type_commit": {"datatype": "type"},
    "Type_create_darray": {"array_of_gsizes": "gsize_array", "array_of_distribs": "distrib_array",
                           "array_of_dargs": "darg_array", "array_of_psizes": "psize_array"},
    "Type_create_struct": {"array_of_blocklengths": "array_of_block_lengths"},
    "Type_create_subarray": {"array_of_sizes": "size_array", "array_of_subsizes": "subsize_array",
                             "array_of_starts": "start_array"},
    "Type_delete_attr": {"datatype": "type"},
    "Type_dup": {"oldtype": "type"},
    "Type_extent": {"datatype": "type"},
    "Type_free": {"datatype": "type"},
    "Type_get_attr": {"datatype": "type"},
    "Type_get_contents": {"datatype": "mtype"},
    "Type_get_envelope": {"datatype": "type"},
    "Type_get_extent": {"datatype": "type"},
    "Type_get_extent_x": {"datatype": "type"},
    "Type_get_name": {"datatype": "type"},
    "Type_lb": {"datatype": "type", "displacement": "lb"},
    "Type_match_size": {"datatype": "type"},
    "Type_set_attr": {"datatype": "type", "attribute_val": "attr_val"},
    "Type_set_name": {"datatype": "type"},
    "Type_size": {"datatype": "type"},
    "Type_size_x": {"datatype": "type"},
    "Type_ub": {"datatype": "mtype", "displacement": "ub"},
    "Waitany": {"indx": "index"},
    "Win_create_errhandler": {"win_errhandler_fn": "function"},
}


class Functions(dict):
    """The functions of one mpi.h by name (e.g. Comm_split), with the
    header's family and the MPI_ names it defines as function-like macros
    (MPICH's handle conversions, MPI_Comm_c2f ...)."""
    family = "openmpi"
    macros = frozenset()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse_header(path):
    text = strip_comments(open(path).read())
    funcs = Functions()
    funcs.family = "mpich" if "MPICH_VERSION" in text else "openmpi"
    for name in INCLUDED[funcs.family]:
        if re.search(r'#\s*include\s*[<"]%s[>"]' % re.escape(name), text):
            text += "\n" + strip_comments(open(os.path.join(os.path.dirname(path), name)).read())
    funcs.macros = frozenset(re.findall(r"#\s*define\s+MPI_(\w+)\(", text))
    renames = MPICH_PARAMS if funcs.family == "mpich" else {}
    for ret, name, params in re.findall(DECLARATIONS[funcs.family], text):
        params = " ".join(params.split())
        plist = []
        if params not in ("void", "") and "..." not in params:
            plist = [Param(p) for p in params.split(",")]
        elif "..." in params:
            plist = [Param(params.split(",")[0])]
        for p in plist:
            p.name = renames.get(name[4:], {}).get(p.name, p.name)
        funcs[name[4:]] = Func(name[4:], " ".join(ret.split()), plist)
    if not funcs:
        raise SystemExit("%s: no MPI function found" % path)
    return funcs


def parse_table(path, funcs):
    for lineno, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        name, kind, anns = line[0], line[1], line[2:]
        if name not in funcs and kind in ("c2f", "f2c") and name in getattr(funcs, "macros", ()):
            continue  # a macro there (MPICH): nothing to wrap
        if name not in funcs:
            raise SystemExit("%s:%d: MPI_%s is not in mpi.h" % (path, lineno, name))
        if kind not in KINDS:
            raise SystemExit("%s:%d: unknown kind %s" % (path, lineno, kind))
        f = funcs[name]
        f.kind = kind
        for a in anns:
            key, _, value = a.partition("=")
            if key.startswith("len."):
                f.param(key[4:])
                f.lens[key[4:]] = value
            else:
                f.ann[key] = value
        for p in f.params:
            if (p.handle_array() or (p.kind and p.array)) and p.name not in f.lens:
                raise SystemExit("%s:%d: MPI_%s: handle array %s needs len.%s=" %
                                 (path, lineno, name, p.name, p.name))


def has_fortran(f):
    return f.kind not in ("c2f", "f2c") and not f.name.startswith("T_") and \
        f.name not in ("Status_c2f", "Status_f2c")


def len_expr(f, p):
    """A C expression for the length of array p (handles as real ones)."""
    expr = f.lens[p.name]
    for fn in ("size", "peers", "indegree", "outdegree"):
        expr = re.sub(r"\b%s\(" % fn, "mpi_%s(" % fn, expr)
    for q in f.params:
        if q.kind:
            expr = re.sub(r"(?<![\w.])%s\b" % q.name, "r_" + q.name, expr)
    return "(" + expr + ")"


def req_kind(f):
    name = f.name
    if name in ("Issend", "Ssend_init"):
        return "mpi_req_kind(VH_SEND | VH_SYNC, dest)"
    if f.kind in ("isend",) or (f.kind == "persistent" and "send" in name.lower()):
        return "mpi_req_kind(VH_SEND, dest)"
    if f.kind in ("irecv",) or (f.kind == "persistent" and name == "Recv_init"):
        return "mpi_req_kind(VH_RECV, source)"
    if f.kind == "mrecv":
        return "mpi_req_kind(VH_RECV, m_ == MPI_MESSAGE_NO_PROC ? MPI_PROC_NULL : 0)"
    return "0"


def indent(lines):
    out = []
    for line in lines:
        if line == "out:":
            out.append("out:")
        elif line == "":
            out.append("")
        else:
            out.append("\t" + line)
    return "\n".join(out)


def main():
    """gen_table.py MPI_H CALLS_DEF: parse both and say what the table
    classifies of that header (the build of another MPI family's library
    starts from this; the test gen-table-mpich runs it on MPICH's)."""
    funcs = parse_header(sys.argv[1])
    parse_table(sys.argv[2], funcs)
    kinds = {}
    for f in funcs.values():
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    print("%s (%s): %d functions, %d classified by %s, %d unknown, %d macros" %
          (sys.argv[1], funcs.family, len(funcs), len(funcs) - kinds.get("unknown", 0),
           os.path.basename(sys.argv[2]), kinds.get("unknown", 0), len(funcs.macros)))


if __name__ == "__main__":
    main()
