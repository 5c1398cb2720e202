"""The MPI library's functions and their classification (calls.def), for
the generators of mpi/ (gen_wrappers.py, gen_recorded.py): what mpi.h
declares, parsed into Func and Param, and the kinds the table gives them.
"""
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


def parse_header(path):
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    funcs = {}
    for ret, name, params in re.findall(
            r"OMPI_DECLSPEC\s+([^;{]*?)\b(MPI_\w+)\s*\(([^;]*?)\)\s*[^;]*;", text):
        params = " ".join(params.split())
        plist = []
        if params not in ("void", "") and "..." not in params:
            plist = [Param(p) for p in params.split(",")]
        elif "..." in params:
            plist = [Param(params.split(",")[0])]
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
