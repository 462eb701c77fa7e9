"""The library's operator table (magi_aot/ops.h) from Python.

One table says which graph node is a weight gather, a copy-engine gather,
another collective, a wait, free (views, getitem, shape queries, to_local)
or compute: the planner, the scheduler, the cost keys and the analytical
model read it in C, and the Python package asks the same table instead of
keeping its own lists.

    from magi_aot.optable import classify
    classify("call_function", "torch.ops._c10d_functional.wait_tensor")  # "wait"
"""
from ._lib import lib

__all__ = ["CLASSES", "OPCODES", "classify", "is_gather"]

# magi_op_class, in the order of the enum (magi_aot/ops.h)
CLASSES = ("compute", "free", "gather", "symm_gather", "collective", "wait")
# magi_opcode (magi_aot/graph.h)
OPCODES = {"placeholder": 0, "get_attr": 1, "call_function": 2, "call_method": 3, "call_module": 4,
           "output": 5}


def classify(op, target):
    """The class of a node (its FX op and target string): one of CLASSES.
    An unknown op is an error (ValueError naming it)."""
    if op not in OPCODES:
        raise ValueError("unknown FX op %r (expected one of %s)" % (op, ", ".join(OPCODES)))
    k = lib.magi_op_classify(OPCODES[op], target.encode() if isinstance(target, str) else None)
    if not 0 <= k < len(CLASSES):
        raise ValueError("operator table: class %d for %s %r is not one this package knows" % (k, op, target))
    return CLASSES[k]


def is_gather(op, target):
    """A weight all-gather, on NCCL or on the copy engine."""
    return classify(op, target) in ("gather", "symm_gather")
