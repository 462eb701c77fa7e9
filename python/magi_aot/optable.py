"""The library's operator table (magi_aot/ops.h) from Python.

One table says which graph node is a weight gather, a copy-engine gather,
another collective, a wait, free (views, getitem, shape queries, to_local)
or compute: the planner, the scheduler, the cost keys and the analytical
model read it in C, and the Python package asks the same table instead of
keeping its own lists. The names of the opcodes and classes are the
library's too (magi_opcode_parse, magi_op_class_name).

    from magi_aot.optable import classify
    classify("call_function", "torch.ops._c10d_functional.wait_tensor")  # "wait"
"""
from ctypes import byref, c_int

from ._lib import MagiError, lib

__all__ = ["classify", "is_gather"]


def _opcode(op):
    code = c_int()
    try:
        lib.magi_opcode_parse(byref(code), op.encode() if isinstance(op, str) else b"")
    except MagiError:
        names = []
        while True:
            name = lib.magi_opcode_name(len(names))
            if not name:
                break
            names.append(name.decode())
        raise ValueError("unknown FX op %r (expected one of %s)" % (op, ", ".join(names))) from None
    return code.value


def classify(op, target):
    """The class of a node (its FX op and target string), as the library
    names it: compute, free, gather, symm_gather, collective or wait. An
    unknown op is an error (ValueError naming it)."""
    k = lib.magi_op_classify(_opcode(op), target.encode() if isinstance(target, str) else None)
    name = lib.magi_op_class_name(k)
    if name is None:
        raise ValueError("operator table: class %d for %s %r has no name" % (k, op, target))
    return name.decode()


def is_gather(op, target):
    """A weight all-gather, on NCCL or on the copy engine."""
    return classify(op, target) in ("gather", "symm_gather")
