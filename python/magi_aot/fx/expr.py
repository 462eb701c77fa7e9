"""Symbolic shape expressions, parsed by the C library (magi_expr_parse).

parse(text) returns a small immutable Python tree so that callers can build
values from it in any algebra (plain ints for concrete shapes, torch SymInts
for fake inputs) without a second grammar on the Python side:

    ("int", v) | ("float", v) | ("bool", v) | ("sym", name)
    (op, (kid, ...))            op in add mul neg floordiv truediv mod pow
                                      eq ne lt le gt ge
    ("call", name, (kid, ...))  Mod, Max, FloorDiv, ... (name kept verbatim)
"""
import contextlib
import functools
from ctypes import POINTER, byref, c_int64, c_void_p

from .._lib import ExprStruct, LOOKUP_NUM_FN, MagiError, lib

_KINDS = ("int", "sym", "bool", "add", "mul", "neg", "floordiv", "truediv", "mod", "pow",
          "eq", "ne", "lt", "le", "gt", "ge", "call", "float")


def _convert(e):
    kind = _KINDS[e.kind] if 0 <= e.kind < len(_KINDS) else None
    if kind is None:
        raise MagiError(-10, "unknown expression node kind %d" % e.kind, "magi_expr_parse")
    if kind in ("int", "bool"):
        return (kind, int(e.ival))
    if kind == "float":
        return ("float", float(e.fval))
    if kind == "sym":
        return ("sym", e.name.decode())
    # Iterative children walk would only matter past Python's recursion limit;
    # the C parser already caps depth (512 by default).
    kids = tuple(_convert(e.kids[i].contents) for i in range(e.nkids))
    if kind == "call":
        return ("call", e.name.decode(), kids)
    return (kind, kids)


@contextlib.contextmanager
def _c_parsed(text):
    """The C library's parse of text (a POINTER(ExprStruct)), valid inside
    the block: its arena is freed when the block ends."""
    arena = c_void_p()
    lib.magi_arena_new(byref(arena), 0)
    try:
        out = POINTER(ExprStruct)()
        raw = text.encode("utf-8")
        lib.magi_expr_parse(byref(out), arena, raw, len(raw), None)
        yield out
    finally:
        lib.magi_arena_free(arena)


@functools.lru_cache(maxsize=65536)
def parse(text):
    """Parse an EXPR string (or accept an int) into the tree above."""
    if isinstance(text, int):
        return ("int", text)
    with _c_parsed(text) as out:
        return _convert(out.contents)


def symbols(tree, acc=None):
    """Distinct symbol names in first-occurrence order."""
    if acc is None:
        acc = []
    k = tree[0]
    if k == "sym":
        if tree[1] not in acc:
            acc.append(tree[1])
    elif k in ("int", "bool", "float"):
        pass
    else:
        for kid in tree[-1]:
            symbols(kid, acc)
    return acc


def eval_int(text, hints):
    """Evaluate with the C evaluator (Python semantics) under `hints`
    ({name: int, float or None}) to an int; raises MagiError MAGI_ERR_UNBACKED naming a
    symbol whose hint is needed but null."""
    if isinstance(text, int):
        return text
    with _c_parsed(text) as out:
        def lookup(_ctx, name, res):
            v = hints.get(name.decode())
            if v is None:
                return 0
            if isinstance(v, float):
                res[0].is_float, res[0].f = 1, v
            else:
                res[0].is_float, res[0].i = 0, int(v)
            return 1
        cb = LOOKUP_NUM_FN(lookup)
        val = c_int64()
        lib.magi_expr_eval_int_num(byref(val), out, cb, None)
        return val.value


class Algebra:
    """How to build a value from a tree: subclass and override leaves/ops."""

    def sym(self, name):
        raise NotImplementedError

    def const(self, v):
        return v

    def boolean(self, v):
        return bool(v)

    def max(self, a, b):
        return max(a, b)

    def min(self, a, b):
        return min(a, b)

    def ite(self, c, a, b):
        return a if c else b

    def floor(self, x):
        import math
        return math.floor(x)

    def ceil(self, x):
        import math
        return math.ceil(x)

    def trunc(self, x):
        return int(x)

    def to_float(self, x):
        return float(x)

    def build(self, tree):
        k = tree[0]
        if k in ("int", "float"):
            return self.const(tree[1])
        if k == "bool":
            return self.boolean(tree[1])
        if k == "sym":
            return self.sym(tree[1])
        if k == "call":
            return self.call(tree[1], [self.build(t) for t in tree[2]])
        kids = [self.build(t) for t in tree[1]]
        if k == "add":
            acc = kids[0]
            for x in kids[1:]:
                acc = acc + x
            return acc
        if k == "mul":
            acc = kids[0]
            for x in kids[1:]:
                acc = acc * x
            return acc
        if k == "neg":
            return -kids[0]
        a, b = kids
        return {
            "floordiv": lambda: a // b, "truediv": lambda: a / b, "mod": lambda: a % b,
            "pow": lambda: a ** b, "eq": lambda: a == b, "ne": lambda: a != b,
            "lt": lambda: a < b, "le": lambda: a <= b, "gt": lambda: a > b, "ge": lambda: a >= b,
        }[k]()

    def call(self, name, a):
        def fold(f):
            acc = a[0]
            for x in a[1:]:
                acc = f(acc, x)
            return acc
        n = len(a)
        if name in ("Mod", "PythonMod") and n == 2:
            return a[0] % a[1]
        if name == "Max" and n >= 1:
            return fold(self.max)
        if name == "Min" and n >= 1:
            return fold(self.min)
        if name in ("FloorDiv", "CleanDiv") and n == 2:
            return a[0] // a[1]
        if name == "CeilDiv" and n == 2:
            return -((-a[0]) // a[1])
        if name in ("IntTrueDiv", "FloatTrueDiv") and n == 2:
            return a[0] / a[1]
        if name == "ToFloat" and n == 1:
            return self.to_float(a[0])
        if name == "TruncToFloat" and n == 1:
            return self.to_float(self.trunc(a[0]))
        if name in ("FloatPow", "PowByNatural", "Pow") and n == 2:
            return a[0] ** a[1]
        if name == "FloorToInt" and n == 1:
            return self.floor(a[0])
        if name == "CeilToInt" and n == 1:
            return self.ceil(a[0])
        if name == "TruncToInt" and n == 1:
            return self.trunc(a[0])
        if name == "RoundToInt" and n == 1:
            return round(a[0])
        if name == "Abs" and n == 1:
            return abs(a[0])
        if name == "Identity" and n == 1:
            return a[0]
        if name == "ModularIndexing" and n == 3:
            return (a[0] // a[1]) % a[2]
        if name == "Where" and n == 3:
            return self.ite(a[0], a[1], a[2])
        raise MagiError(-10, "cannot build uninterpreted function %s/%d" % (name, n))
