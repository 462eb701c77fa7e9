"""Dynamo source names: parse them and follow them to live objects.

Dynamo names every input of a frame it compiles by where it came from
(`L['self']._modules['fc']._parameters['weight']`, `L['x'].size()[1]`).
parse_source reads such a name into a root local and a list of steps;
follow walks the steps from a live object (the model, the call's
arguments). The save backend records sources; warm_start binds them.
"""
import re

from .._lib import MagiError

__all__ = ["parse_source", "follow"]

_ROOT = re.compile(r"L\['([^'\\]+)'\]")
_STEP = re.compile(r"\._modules\['([^'\\]*)'\]|\._parameters\['([^'\\]*)'\]|"
                   r"\._buffers\['([^'\\]*)'\]|\.size\(\)\[(\d+)\]|\.stride\(\)\[(\d+)\]|"
                   r"\.storage_offset\(\)|\[(\d+)\]|\['([^'\\]*)'\]|\.([A-Za-z_]\w*)")


def _err(code, msg):
    return MagiError(code, msg, "warm_start")


def parse_source(text):
    """(root name, [(op, arg)]) of a Dynamo source name; ops: "module",
    "param", "buffer", "size", "stride", "offset", "index", "key", "attr".
    Raises MagiError MAGI_ERR_UNSUPPORTED for any other form (globals,
    calls, ...)."""
    m = _ROOT.match(text or "")
    if not m:
        raise _err(-13, "source %r is not a local of the compiled frame" % (text,))
    root, pos, steps = m.group(1), m.end(), []
    names = ("module", "param", "buffer", "size", "stride", "index", "key", "attr")
    while pos < len(text):
        s = _STEP.match(text, pos)
        if not s:
            raise _err(-13, "source %r: cannot follow '%s'" % (text, text[pos:]))
        for i, g in enumerate(s.groups()):
            if g is not None:
                op = names[i]
                steps.append((op, int(g) if op in ("size", "stride", "index") else g))
                break
        else:
            steps.append(("offset", None))
        pos = s.end()
    return root, steps


def follow(obj, steps, text, allow_none=False):
    """The object `steps` (parse_source) lead to from `obj`; MagiError
    MAGI_ERR_NOT_FOUND naming `text` where a step finds nothing, or finds
    None (unless allow_none and it is the last step)."""
    for k, (op, a) in enumerate(steps):
        try:
            if op == "module":
                obj = obj._modules[a]
            elif op == "param":
                obj = obj._parameters[a]
            elif op == "buffer":
                obj = obj._buffers[a]
            elif op == "size":
                obj = obj.size()[a]
            elif op == "stride":
                obj = obj.stride()[a]
            elif op == "offset":
                obj = obj.storage_offset()
            elif op in ("index", "key"):
                obj = obj[a]
            else:
                obj = getattr(obj, a)
        except (KeyError, IndexError, AttributeError, TypeError):
            raise _err(-14, "%s: not found in the model or inputs (at %s %r)" % (text, op, a))
        if obj is None and not (allow_none and k == len(steps) - 1):
            raise _err(-14, "%s: missing (None)" % text)
    return obj
