"""The warm start: a model's compiled forward from its stored region, without torch.compile.

    model = Model(cfg); model.load_state_dict(sd)
    fwd = magi_aot.warm_start(model, "/cache", "llama")
    out = fwd(input_ids, attention_mask=m)   # what model(...) returns
    fwd.report                     # how it was served, and why

The region's placeholders are bound by the Dynamo source each one was
taken from (recorded by the save backend): `L['self']...._parameters['w']`
and `._buffers[...]` resolve to the model's tensors once, at bind time, and
are checked against the placeholder's dtype, shape and device (an error
names the parameter); `L['x']` / `L['args'][0]` resolve to the call's
inputs (bound through forward's signature, so positional and keyword
spellings agree); `L['x'].size()[1]` (a dynamic size Dynamo passed as a
SymInt) to that input's size; a scalar attribute Dynamo lifted as an
input (`L['self']...attention_scaling`) is read from the module on every
call.

Every call is checked as torch.compile's guards would check it: the
scalar attributes and arguments Dynamo specialised (recorded with their
values by the save backend), which arguments were given, each tensor
input's dtype, device, rank, static sizes and the ranges and guards of
its symbolic sizes. In the process that traced, a failed check makes
Dynamo recompile (the new region replaces the old one in the index).
Elsewhere the model's other stored variants are tried (regions other
processes stored for other calls, listed in the index after the latest);
where none serves, the call is compiled in this process as torch.compile
would (the dimensions whose size changed taken as dynamic), served, and
stored beside them, saying so once; with on_miss="raise" (or
MAGI_AOT_ON_MISS=raise) it is refused naming the input or attribute and
what the code was compiled for. The return value's structure, recorded
after the tracing call, is rebuilt around the region's outputs.

Grad mode: the stored code is the region's inference graph; under grad,
with an input that requires grad, it runs behind an autograd.Function
whose backward recomputes the forward from the region's graph
(magi_aot.compile.grad), so outputs carry autograd as eager's do.

How the forward is obtained, in order:
  1. the model's region list is in the cache and its region's (or the
     first of its variants whose parameters fit the model) stored
     code matches the running key and traced sources, and only this user
     can have written the entry (the cache's directories and the entry file
     are this user's, writable by nobody else) or the caller opted in
     (trust_compiled=True, MAGI_AOT_TRUST_COMPILED=1): loaded directly (no
     Dynamo trace, no Inductor compile);
  2. stored code exists but a key field differs (torch, GPU arch, ...), or
     the entry is not known to be this user's own (a group-shared cache):
     the region is compiled from its stored graph and rebuilt fake inputs
     (its targets resolved against the loader's allow-list);
  3. nothing stored, or a traced source file changed (the stored graph may
     be stale): the first call traces the model with torch.compile and the
     save backend (store_code=True), which stores graph and code for the
     next process, then binds to the fresh region.
`report["served"]` is "stored", "compiled" or "traced"; `report["reason"]`
says why the stored code was not used (the key field or the file).

Graph breaks. The trace runs under fullgraph, so a graph break (or a
frame that changes an object it did not create, which Dynamo replays in
Python after the graph) is met before anything runs. The model is then
served per submodule: its forward runs as Python, and each of the
largest submodules whose forwards trace as one graph (transformers'
decoder layers, a head) is bound like a model of its own, stored under
"<model_tag>/<qualified name>" in the same cache (one stored code for
layers that trace alike); a submodule that breaks is run as Python in
turn and its children are bound. The index records the split (which
submodules are bound, each break with its file:line and Dynamo's
reason), so a later process binds the same submodules without Dynamo.
Where nothing can be bound, or with submodules=False, the error names
the break and the fix. Dynamo's own joining of regions (resume
functions in rewritten bytecode) is not reproduced.
"""
import inspect
import re
import time
from typing import TYPE_CHECKING, Any, Iterable, Optional, Union

from .. import config
from ..fx import expr as _expr
from .._lib import MagiError
from .dynamo_source import follow as _follow, parse_source
from .progress import Progress, say
from ..cache import _Cache, cache_get_entry, index_key, read_index_entry
from ..region import load_bytes_with_sections
from ..report import LoadReport
from .backend import SaveBackend, SideEffectsRefused
from .code import choose, load_region_code, transport_used, use_triton_cache
from .grad import with_autograd
from .keys import region_device
from .trust import will_load

if TYPE_CHECKING:
    import os

    import torch

    from ..region import Region

__all__ = ["warm_start", "BoundForward", "parse_source"]

def _err(code, msg):
    return MagiError(code, msg, "warm_start")


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _check_tensor(t, ph, text):
    import torch
    ev = ph.get("example_value") or {}
    if not isinstance(t, torch.Tensor):
        raise _err(-11, "%s: expected a tensor, found %s" % (text, type(t).__name__))
    want = ev.get("dtype")
    if want and want != _dtype_name(t):
        raise _err(-11, "%s: dtype %s, the region was compiled for %s" % (text, t.dtype, want))
    shape = ev.get("shape")
    if shape is not None:
        ok = len(shape) == t.dim() and all(not isinstance(d, int) or d == s
                                           for d, s in zip(shape, t.shape))
        if not ok:
            raise _err(-11, "%s: shape %s, the region was compiled for %s"
                       % (text, list(t.shape), shape))
    dev = ev.get("device")
    if dev and t.device.type != str(dev).split(":")[0]:
        raise _err(-11, "%s: on %s, the region was compiled for %s" % (text, t.device, dev))


# ------------------------------------------------------------------ the return value
MAX_TREE_DEPTH = 64


def _type_name(cls):
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _pytree_node(cls):
    from torch.utils import _pytree as pt
    return pt.SUPPORTED_NODES.get(cls)


def _encode_const(v):
    import torch
    if v is None or isinstance(v, (bool, int, float, str)):
        return {"t": "const", "v": v}
    if isinstance(v, torch.dtype):
        return {"t": "dtype", "v": str(v).replace("torch.", "")}
    if isinstance(v, torch.device):
        return {"t": "device", "v": str(v)}
    return None


def encode_output(ret, outputs, args, kwargs):
    """The JSON tree of what the model returned, with every tensor a graph
    output (by identity, {"t": "out", "i": k}) or one of the call's tensor
    arguments ({"t": "arg"/"kwarg", ...}); raises MagiError
    MAGI_ERR_UNSUPPORTED naming the path of anything else."""
    import torch
    ids = {id(o): i for i, o in enumerate(outputs) if isinstance(o, torch.Tensor)}
    scalars = [(i, o) for i, o in enumerate(outputs) if not isinstance(o, torch.Tensor)]
    argids = {id(a): ("arg", i) for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
    argids.update({id(a): ("kwarg", k) for k, a in kwargs.items() if isinstance(a, torch.Tensor)})
    seen = {}

    def enc(v, path, depth):
        if depth > MAX_TREE_DEPTH:
            raise _err(-13, "%s: the return value nests deeper than %d" % (path, MAX_TREE_DEPTH))
        if isinstance(v, torch.Tensor):
            if id(v) in ids:
                return {"t": "out", "i": ids[id(v)]}
            if id(v) in argids:
                kind, a = argids[id(v)]
                return {"t": kind, "v": a}
            raise _err(-13, "%s: a tensor that is neither an output of the region nor an "
                       "argument of the call" % path)
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise _err(-13, "%s: a symbolic %s" % (path, type(v).__name__))
        for i, o in scalars:
            if type(o) is type(v) and o == v and not isinstance(v, bool):
                return {"t": "out", "i": i}
        c = _encode_const(v)
        if c is not None:
            return c
        if id(v) in seen:
            return {"t": "ref", "n": seen[id(v)]}
        seen[id(v)] = len(seen)
        cls = type(v)
        node = _pytree_node(cls)
        if cls in (list, tuple):
            return {"t": cls.__name__, "items": [enc(x, "%s[%d]" % (path, i), depth + 1)
                                                 for i, x in enumerate(v)]}
        if cls is dict:
            keys = list(v)
            if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in keys):
                raise _err(-13, "%s: a dict with keys other than str and int" % path)
            return {"t": "dict", "keys": keys,
                    "items": [enc(v[k], "%s[%r]" % (path, k), depth + 1) for k in keys]}
        if node is not None and not (isinstance(v, tuple) and hasattr(cls, "_fields")):
            children, context = node.flatten_fn(v)
            try:
                import json
                json.dumps(context)
            except (TypeError, ValueError):
                raise _err(-13, "%s: a %s whose pytree context is not plain data"
                           % (path, _type_name(cls)))
            return {"t": "node", "type": _type_name(cls), "context": context,
                    "items": [enc(x, "%s.<%d>" % (path, i), depth + 1)
                              for i, x in enumerate(children)]}
        if isinstance(v, tuple) and hasattr(cls, "_fields"):   # a namedtuple
            return {"t": "namedtuple", "type": _type_name(cls),
                    "items": [enc(x, "%s.%s" % (path, f), depth + 1)
                              for f, x in zip(cls._fields, v)]}
        if hasattr(v, "__dict__") and _plain_object_problem(cls, None) is None:
            attrs = vars(v)
            return {"t": "object", "type": _type_name(cls), "keys": list(attrs),
                    "items": [enc(x, "%s.%s" % (path, k), depth + 1) for k, x in attrs.items()]}
        raise _err(-13, "%s: a %s, which warm_start cannot rebuild from the region's outputs"
                   % (path, _type_name(cls)))
    return enc(ret, "output", 0)


def _resolve_type(name, what):
    """An already imported class by module.qualname (nothing is imported:
    the name comes from the cache index)."""
    import sys
    mod, _, qual = name.rpartition(".")
    obj = None
    for cut in range(len(name.split(".")) - 1, 0, -1):
        parts = name.split(".")
        m = sys.modules.get(".".join(parts[:cut]))
        if m is None:
            continue
        obj = m
        for a in parts[cut:]:
            obj = getattr(obj, a, None)
        if obj is not None:
            break
    if not isinstance(obj, type):
        raise _err(-14, "return value: %s %s is not an imported class" % (what, name))
    return obj


def _is_namedtuple(cls):
    """A class collections.namedtuple (or typing.NamedTuple) made: a tuple
    whose fields are names and which adds no __new__ of its own past the
    generated one (checked by what the generator sets)."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        return False
    fields = getattr(cls, "_fields", None)
    return (isinstance(fields, tuple) and all(isinstance(f, str) for f in fields)
            and isinstance(getattr(cls, "_field_defaults", None), dict)
            and callable(getattr(cls, "_make", None)))


def _plain_object_problem(cls, home):
    """None when an "object" node may rebuild an instance of cls without
    running any of its code: object.__new__, no __slots__, no __del__ (run
    when the rebuilt value is dropped), and, when `home` is given (the
    index is not known to be this user's), defined in one of the `home`
    top-level packages (the model's own); else why not."""
    if cls.__new__ is not object.__new__:
        return "it has its own __new__"
    if any(getattr(k, "__slots__", ()) for k in cls.__mro__):
        return "it has __slots__"
    if any("__del__" in vars(k) for k in cls.__mro__):
        return "it has a __del__"
    if home is not None and cls.__module__.split(".")[0] not in home:
        return ("the cache's index is not known to be this user's own, and the class is not "
                "from the model's package (%s)" % ", ".join(sorted(home)))
    return None


class TreeRefused(MagiError):
    """A recorded return value that names something OutputTree does not
    rebuild (MAGI_ERR_UNSUPPORTED): the index holding it is not used."""


class OutputTree:
    """Rebuilds the recorded return value from the region's outputs.

    The tree is data read from a cache's index; nothing it names is
    called. Every class it names is resolved and checked once, here: a
    "namedtuple" node must name a real namedtuple (rebuilt with
    tuple.__new__, not by calling the class), a "node" a registered pytree
    node, an "object" a plain class (see _plain_object_problem), a "dtype"
    a torch dtype. home: None when the index is this user's own, else the
    top-level packages an "object" node's class may come from (the
    model's). Raises MagiError MAGI_ERR_UNSUPPORTED naming the path of
    the node refused."""

    def __init__(self, tree, home=None):
        self.tree = tree
        self._types = {}
        try:
            self._check(tree, "output", home, 0)
        except MagiError as e:
            raise TreeRefused(e.code, e.message, e.func) from None

    def _type(self, name, what):
        t = self._types.get(name)
        if t is None:
            t = self._types[name] = _resolve_type(name, what)
        return t

    def _check(self, n, path, home, depth):
        import torch
        if depth > MAX_TREE_DEPTH or not isinstance(n, dict):
            raise _err(-13, "return value %s: not a tree node" % path)
        t = n.get("t")
        if t in ("out", "arg", "kwarg", "const", "device", "ref"):
            return
        if t == "dtype":
            if not isinstance(getattr(torch, str(n.get("v")), None), torch.dtype):
                raise _err(-13, "return value %s: %r is not a torch dtype" % (path, n.get("v")))
            return
        name = n.get("type")
        if t == "namedtuple":
            if not _is_namedtuple(self._type(name, "namedtuple")):
                raise _err(-13, "return value %s: %s is not a namedtuple" % (path, name))
        elif t == "node":
            if _pytree_node(self._type(name, "pytree node")) is None:
                raise _err(-13, "return value %s: %s is not a registered pytree node"
                           % (path, name))
        elif t == "object":
            why = _plain_object_problem(self._type(name, "object"), home)
            if why:
                raise _err(-13, "return value %s: %s is not rebuilt: %s" % (path, name, why))
        elif t not in ("list", "tuple", "dict"):
            raise _err(-13, "return value %s: unknown tree node %r" % (path, t))
        items = n.get("items")
        if not isinstance(items, list):
            raise _err(-13, "return value %s: no items" % path)
        for i, x in enumerate(items):
            self._check(x, "%s.<%d>" % (path, i), home, depth + 1)

    def build(self, outputs, args, kwargs):
        import torch
        made = []

        def dec(n):
            t = n.get("t")
            if t == "out":
                return outputs[n["i"]]
            if t == "arg":
                return args[n["v"]]
            if t == "kwarg":
                return kwargs[n["v"]]
            if t == "const":
                return n["v"]
            if t == "dtype":
                return getattr(torch, n["v"])
            if t == "device":
                return torch.device(n["v"])
            if t == "ref":
                return made[n["n"]]
            slot = len(made)
            made.append(None)
            if t in ("list", "tuple", "dict"):
                items = [dec(x) for x in n["items"]]
                v = (items if t == "list" else tuple(items) if t == "tuple"
                     else dict(zip(n["keys"], items)))
            elif t == "node":
                node = _pytree_node(self._type(n["type"], "pytree node"))
                v = node.unflatten_fn([dec(x) for x in n["items"]], n["context"])
            elif t == "namedtuple":
                # tuple.__new__: the class's own code is not run
                v = tuple.__new__(self._type(n["type"], "namedtuple"),
                                  [dec(x) for x in n["items"]])
            else:  # "object", checked plain in __init__
                v = object.__new__(self._type(n["type"], "object"))
                made[slot] = v
                v.__dict__.update(zip(n["keys"], [dec(x) for x in n["items"]]))
            made[slot] = v
            return v
        return dec(self.tree)


# ------------------------------------------------------------------ guards
def _same(a, b):
    if type(a) is not type(b):
        return False
    return a == b or (isinstance(a, float) and a != a and b != b)


class _Miss(Exception):
    """A call the stored code was not compiled for (what torch.compile's
    guards would reject). varying: [(tensor, dim)] of this call whose size
    differs from the static size the code was compiled for (a compile in
    this process takes those dimensions as dynamic, as Dynamo's automatic
    dynamic shapes do after a size changed)."""

    def __init__(self, msg, varying=()):
        super().__init__(msg)
        self.varying = list(varying)


def _kind(v):
    import torch
    if isinstance(v, torch.Tensor):
        return "tensor"
    if v is None:
        return "None"
    return type(v).__name__


def _scalar_as_tensor(v, ev):
    """A Python number where the region takes a 0-d tensor (Dynamo passes an
    unspecialised float that way)."""
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and ev.get("kind") == "tensor" and ev.get("shape") == [])


def _as_tensor(v, ev):
    import torch
    return torch.tensor(v, dtype=getattr(torch, ev.get("dtype") or "float64"))


def _bind_scalar(ev, v, text, syms):
    """A SymInt / SymFloat placeholder that is one symbol: its value now."""
    if ev.get("kind") in ("symint", "symfloat") and isinstance(v, (int, float)) and \
            _expr.parse(str(ev["expr"]))[0] == "sym":
        syms.setdefault(_expr.parse(str(ev["expr"]))[1], (v, text))


class BoundForward:
    """forward(*args, **kwargs) -> what model(*args, **kwargs) returns.
    Attributes: report, region (magi_aot.Region or None before the first
    traced call), fn (the compiled callable of the region)."""
    report: "LoadReport"
    region: "Optional[Region]"

    def __init__(self, model, cache_dir, model_tag, transport, dynamic, store_code,
                 trust_compiled=None, allow_targets=(), submodules=None, on_miss=None):
        self.model = model
        # read once, here: a bad value fails now, not at the first miss
        self.on_miss = _on_miss_value(on_miss)
        self._records = []      # the index's records as this process read them
        self._states = {}       # record number -> its loaded state, or why it does not serve
        self._current = 0       # the record whose code serves now
        self.submodules = submodules
        self.trust_compiled = trust_compiled
        self.allow_targets = tuple(allow_targets or ())
        self.cache_dir = cache_dir
        self.model_tag = model_tag
        self.transport = transport
        self.dynamic = dynamic
        self.store_code = store_code
        self.region = None
        self.fn = None
        self.report = LoadReport(served=None, reason=None, recompiles=[])
        self._sig = inspect.signature(model.forward)
        self._plan = None
        self._entry = None
        self._tree = None
        self._compiled = None   # the torch.compile'd model when this process traced
        self._backend = None
        self._split = None      # a _Split when the model is served per submodule

    # -- the call's arguments, as the traced frame saw them
    def _normalise(self, args, kwargs):
        """(positional, keyword) as forward's signature binds them (one form
        whichever way the caller spelt the call) and {parameter: value},
        defaults included: the locals of a frame that is forward itself."""
        try:
            b = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise _err(-1, "forward%s: %s" % (self._sig, e))
        args, kwargs = tuple(b.args), dict(b.kwargs)
        b.apply_defaults()
        return args, kwargs, dict(b.arguments)

    # the traced frame's locals holding the call's positional and keyword
    # arguments (torch.compile's wrapper around the module)
    _ARGS, _KWARGS = "args", "kwargs"
    # the wrapper's local holding the module itself: a module whose forward
    # Dynamo does not trace as its own frame (torch.nn's containers:
    # nn.Sequential) is traced through the wrapper, L['fn']._modules['0']...
    _MODULE = "fn"

    def _is_model(self, root):
        """Whether a traced frame's local is the model: forward's `self`,
        or the wrapper's module local where forward has no such parameter."""
        return root == "self" or (root == self._MODULE and root not in self._sig.parameters)

    def _root(self, root, args, kwargs, named):
        """The value of a local of the traced frame: forward's own
        parameters, else the positional / keyword arguments of the wrapper
        torch.compile put around the module (L['args'][0], L['kwargs']['ids'])."""
        if self._is_model(root):
            return self.model
        if root in self._sig.parameters:
            return named[root]
        return args if root == self._ARGS else kwargs

    # -- binding
    def _bind(self, region, ent, home=None):
        """Bind the region's placeholders to the model and the call by the
        index entry's sources. home: None when the index is this user's
        own, else the packages its return value may name classes of
        (OutputTree)."""
        sources = ent["sources"]
        phs = region.placeholders
        if len(sources) != len(phs):
            raise _err(-11, "region has %d placeholders, the index records %d sources"
                       % (len(phs), len(sources)))
        plan = []
        for ph, src in zip(phs, sources):
            text = src.get("source")
            root, steps = parse_source(text)
            ev = ph.get("example_value") or {}
            if self._is_model(root):
                if ev.get("kind") in ("symint", "symfloat", "symbool", "int", "float", "bool"):
                    # a scalar attribute Dynamo lifted as an input: read every call
                    plan.append(("attr", steps, text, ev))
                    continue
                t = _follow(self.model, steps, text)
                if _scalar_as_tensor(t, ev):
                    # a float attribute Dynamo passes as a 0-d tensor: read every call
                    plan.append(("attr", steps, text, ev))
                    continue
                _check_tensor(t, ph, text)
                plan.append(("const", t))
            elif root in (self._ARGS, self._KWARGS) or root in self._sig.parameters:
                plan.append(("input", root, steps, text, ev))
            else:
                raise _err(-13, "source %r: '%s' is neither the model nor an argument of "
                           "its forward %s" % (text, root, list(self._sig.parameters)))
        self._plan = plan
        self._entry = ent
        self._tree = OutputTree(ent["outputs"], home) if ent.get("outputs") else None
        self._guards = []
        for g in ent.get("guards") or ():
            root, steps = parse_source(g["source"])
            # the frame's other locals (a wrapper's function object) are not
            # the call's to change
            if self._is_model(root) or root in (self._ARGS, self._KWARGS) or \
                    root in self._sig.parameters:
                self._guards.append((g["source"], root, steps, g["value"]))
        self._shapes = ent.get("shapes") or {}

    def _check_call(self, args, kwargs, named):
        """Raise _Miss where torch.compile's guards would reject this call."""
        call = self._entry.get("call")
        if call is not None:
            kinds = [_kind(a) for a in args]
            if len(kinds) != len(call["args"]):
                params = [n for n in self._sig.parameters if n != "self"]

                def names(k):
                    return ", ".join(params[:k]) if len(params) >= k else "%d arguments" % k
                raise _Miss("forward was called with (%s), the stored code was traced with (%s) "
                            "(the other parameters at their defaults)"
                            % (names(len(kinds)), names(len(call["args"]))))
            for i, (k, want) in enumerate(zip(kinds, call["args"])):
                if k != want:
                    raise _Miss("argument %d is a %s, the stored code was traced with a %s"
                                % (i, k, want))
            if sorted(kwargs) != sorted(call["kwargs"]):
                raise _Miss("keyword arguments %s, the stored code was traced with %s"
                            % (sorted(kwargs), sorted(call["kwargs"])))
            for k, want in call["kwargs"].items():
                if _kind(kwargs[k]) != want:
                    raise _Miss("keyword argument '%s' is a %s, the stored code was traced with "
                                "a %s" % (k, _kind(kwargs[k]), want))
        for text, root, steps, want in self._guards:
            try:
                got = _follow(self._root(root, args, kwargs, named), steps, text, True)
            except MagiError:
                got = "<missing>"
            if not _same(got, want):
                raise _Miss("%s is %r, the stored code was traced with %r (torch.compile "
                            "guards on it)" % (text, got, want))

    def _check_tensor_input(self, t, ev, text, syms, later):
        import torch
        if not isinstance(t, torch.Tensor):
            raise _Miss("%s: expected a tensor, found %s" % (text, type(t).__name__))
        want = ev.get("dtype")
        if want and want != _dtype_name(t):
            raise _Miss("%s: dtype %s, the stored code was compiled for %s" % (text, t.dtype, want))
        dev = ev.get("device")
        if dev and t.device.type != str(dev).split(":")[0]:
            raise _Miss("%s: on %s, the stored code was compiled for %s" % (text, t.device, dev))
        shape = ev.get("shape")
        if shape is None:
            return
        if len(shape) != t.dim():
            raise _Miss("%s: %d dimensions, the stored code was compiled for %d"
                        % (text, t.dim(), len(shape)))
        marked = getattr(t, "_dynamo_dynamic_indices", ())
        for d, (want, got) in enumerate(zip(shape, t.shape)):
            if isinstance(want, int):
                if got != want:
                    raise _Miss("%s dim %d is %d; the stored code was compiled for %d only (the "
                                "dimension was static when traced)" % (text, d, got, want),
                                [(t, d)] if min(got, want) >= 2 else ())
                if d in marked:
                    raise _Miss("%s dim %d is marked dynamic; the stored code has it static (%d)"
                                % (text, d, want))
            elif _expr.parse(want)[0] == "sym":
                name = _expr.parse(want)[1]
                if name in syms and syms[name][0] != got:
                    raise _Miss("%s dim %d is %d, but %s (%s) is %d; the stored code was "
                                "compiled with them equal" % (text, d, got, syms[name][1],
                                                              want, syms[name][0]))
                syms.setdefault(name, (int(got), "%s dim %d" % (text, d)))
            else:
                later.append((want, int(got), "%s dim %d" % (text, d)))

    def _check_inputs(self, args, kwargs, named):
        """The call's inputs as the region's placeholders take them; raises
        _Miss for a value the stored code was not compiled for."""
        syms, later, out = {}, [], []
        for p in self._plan:
            if p[0] == "const":
                out.append(p[1])
                continue
            if p[0] == "attr":
                _, steps, text, ev = p
                v = _follow(self.model, steps, text)
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise _Miss("%s is a %s, the stored code takes a number there"
                                % (text, type(v).__name__))
                if ev.get("kind") == "tensor":
                    v = _as_tensor(v, ev)
                else:
                    _bind_scalar(ev, v, text, syms)
                out.append(v)
                continue
            _, root, steps, text, ev = p
            try:
                v = _follow(self._root(root, args, kwargs, named), steps, text)
            except MagiError:
                raise _Miss("%s: not given in this call" % text)
            if _scalar_as_tensor(v, ev):
                out.append(_as_tensor(v, ev))
            elif ev.get("kind") == "tensor":
                self._check_tensor_input(v, ev, text, syms, later)
            else:
                _bind_scalar(ev, v, text, syms)
            out.append(v)
        vals = {k: v[0] for k, v in syms.items()}
        ranges = self._shapes.get("ranges") or {}
        for name, (v, where) in syms.items():
            if isinstance(v, float):
                continue
            lo, hi = ranges.get(name, (2, None))
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                why = " (torch.compile specialises sizes 0 and 1)" if lo == 2 and v < 2 else ""
                raise _Miss("%s is %d; the stored code was compiled for %s in [%s, %s]%s"
                            % (where, v, name, lo, "inf" if hi is None else hi, why))
        for want, got, where in later:
            if _expr.eval_int(want, vals) != got:
                raise _Miss("%s is %d; the stored code was compiled for %s = %d"
                            % (where, got, want, _expr.eval_int(want, vals)))
        for g in self._shapes.get("guards") or ():
            try:
                ok = _expr.eval_int(g, vals)
            except MagiError as e:
                raise _Miss("cannot check the stored code's shape guard %s: %s" % (g, e.message))
            if not ok:
                raise _Miss("the stored code's shape guard %s does not hold for %s"
                            % (g, ", ".join("%s = %s (%s)" % (syms[k][1], syms[k][0], k)
                                            for k in sorted(syms))))
        return out

    # -- obtaining the code
    def _from_cache(self, own_code=None):
        """None once loaded, else why the model must be traced. own_code:
        {key: payload} this process has just compiled and stored (a
        payload read back equal to one of them is this process's own).

        The index lists the model's latest region and, under "variants",
        the regions other processes stored before it for calls it does not
        serve (another size, another configuration of the model): the
        first one whose parameters bind is loaded; the others are tried
        when a call misses (_other_variant)."""
        self._records, self._states = [], {}
        idx, index_untrusted = read_index_entry(self.cache_dir, self.model_tag)
        if idx is None:
            return "no region stored for model '%s'" % self.model_tag
        # the index is data from a cache others may write: what its return
        # value may rebuild is narrowed unless only this user can have
        # written it (or the caller trusts the cache)
        home = None
        if not will_load(index_untrusted, self.trust_compiled):
            home = {type(self.model).__module__.split(".")[0]}
        if idx.get("split") is not None:
            return self._from_split_record(idx["split"])
        if self.submodules not in (None, False):
            return "model '%s' is stored whole; submodules=%r binds its submodules" % (
                self.model_tag, self.submodules)
        regions = idx.get("regions") or []
        if len(regions) != 1:
            # a trace with graph breaks outside warm_start (torch.compile
            # with the save backend): the regions' Python glue is unknown
            return ("the index of model '%s' lists %d regions (graph breaks) from a trace "
                    "outside warm_start" % (self.model_tag, len(regions)))
        variants = idx.get("variants")
        recs = regions + [v for v in (variants if isinstance(variants, list) else ())
                          if isinstance(v, dict) and isinstance(v.get("key"), str)]
        self._records, self._home, self._own_code = recs, home, own_code
        first = None
        for i, ent in enumerate(recs):
            why, bind_error = self._use(i)
            if why is None:
                return None
            if i == 0 and why.startswith("source changed"):
                self._records = []   # the stored graphs may all be stale
                return why
            first = first or (why, bind_error)
        why, bind_error = first
        if bind_error is not None and self._on_miss() == "raise":
            raise _err(bind_error.code, "%s. The model differs from the one whose code is "
                       "stored under '%s' (another configuration?): use another model_tag, "
                       "remove the entry (magi-aot cache rm DIR --model %s), or let warm_start "
                       "compile and store code for this one beside it (on_miss='compile', "
                       "the default)" % (bind_error.message, self.model_tag, self.model_tag))
        return why

    def _use(self, i):
        """Load and bind the index's record i (kept for later switches):
        (None, None) once it serves, else (why not, the bind error or None)."""
        st = self._states.get(i)
        if st is None:
            st = self._states[i] = self._load_record(self._records[i])
        if isinstance(st, tuple):
            return st
        (self.region, self.fn, self._plan, self._entry, self._tree, self._guards,
         self._shapes) = st["state"]
        self.report.update(st["report"])
        self._current = i
        return None, None

    def _load_record(self, ent):
        """{"state", "report"} of one index record loaded and bound, or
        (why it does not serve, the bind error or None)."""
        data, untrusted = cache_get_entry(self.cache_dir, ent["key"])
        if data is None:
            return "region %s is listed but not in the cache" % ent["key"], None
        t = time.perf_counter()
        # the region and its stored code from one verified read
        region, payloads = load_bytes_with_sections(data, transport=self.transport)
        mine = (self._own_code or {}).get(ent["key"])
        if untrusted and mine is not None and mine in payloads:
            payloads, untrusted = [mine], None   # the bytes this process compiled
        used = transport_used(region)
        load_s = time.perf_counter() - t
        # trust is decided before any file a payload names is opened
        chosen = choose(region, payloads, used,
                        check_sources=will_load(untrusted, self.trust_compiled))
        why = chosen[2]
        if why and why.startswith("source changed"):
            return why, None
        try:
            self._bind(region, ent, self._home)  # a missing/mismatched tensor fails before loading
        except TreeRefused as e:
            return "the index of model '%s' is not used: %s" % (self.model_tag, e.message), None
        except MagiError as e:
            if e.code not in (-11, -14):   # MAGI_ERR_MISMATCH, MAGI_ERR_NOT_FOUND
                raise
            return "the stored code does not fit the model: %s" % e.message, e
        if region_device(region.doc) == "cuda":
            use_triton_cache(self.cache_dir)
        fn, rep = self._load_code(ent["key"], lambda: load_region_code(
            region, payloads, transport_used=used, untrusted=untrusted,
            trust_compiled=self.trust_compiled, allow_targets=self.allow_targets,
            chosen=chosen))
        rep["timings"]["artifact_load_s"] = load_s
        allow = self.allow_targets
        fn = with_autograd(fn, lambda: region.graph_module(allow_targets=allow),
                           "model '%s'" % self.model_tag)
        return {"state": (region, fn, self._plan, self._entry, self._tree, self._guards,
                          self._shapes), "report": rep}

    def _other_variant(self, args, kwargs, named):
        """The inputs of this call for another stored variant that serves
        it (switched to), or None where none does."""
        cur = getattr(self, "_current", 0)
        for i in range(len(self._records)):
            if i == cur:
                continue
            why, _ = self._use(i)
            if why is not None:
                continue
            try:
                self._check_call(args, kwargs, named)
                return self._check_inputs(args, kwargs, named)
            except _Miss:
                continue
        self._use(cur)
        return None

    def _on_miss(self):
        return self.on_miss

    def _start(self):
        """Load what the cache holds for the model (None), else say why not;
        with submodules patterns and nothing usable stored, the matching
        submodules are bound (each traced on its first call)."""
        why = self._from_cache()
        if why and self._split is None and self.submodules not in (None, False):
            self._split = _Split(self, _match_key(self.submodules))
            self._split.reason = why
        return why

    def _load_code(self, key, load):
        return load()

    def _from_split_record(self, rec):
        want = _match_key(self.submodules)
        if self.submodules is False:
            return ("model '%s' is stored per submodule (its forward has graph breaks); "
                    "submodules=False binds it whole" % self.model_tag)
        if want is not None and rec.get("match") != want:
            return "the stored submodules were chosen by %r, not %r" % (rec.get("match"), want)
        self._split = _Split(self, rec.get("match"), rec)
        self.report.update(self._split.summary())
        return None

    def _compile_model(self):
        import torch
        return torch.compile(self.model, backend=self._backend, dynamic=self.dynamic,
                             fullgraph=True)

    def _on_break(self, info, args, kwargs):
        """The trace met a graph break (nothing of the call ran): serve the
        model per submodule, or refuse naming the break."""
        if self.submodules is False:
            raise _err(-13, "model '%s' %s; warm_start(..., submodules=False) serves only a "
                       "model that traces as one graph. %s, or leave submodules at its "
                       "default to bind the largest submodules that trace as one graph and "
                       "run the code around them eagerly"
                       % (self.model_tag, _describe_break(info), _FIX))
        self.fn = self.region = None
        self._split = _Split(self, None)
        self._split.broke("", self.model, info)
        return self._split(*args, **kwargs)

    def _trace(self, args, kwargs, why, announce=True):
        """Run the model through torch.compile with the save backend (the
        first time, or again where its guards fail: Dynamo recompiles as it
        would under torch.compile), record the return value's structure and
        bind to the region now stored. why: the reason the stored code was
        not used (None for a recompile: the first reason stays). Returns the
        model's return value."""
        t = time.perf_counter()
        if self._compiled is None:
            # refuse_side_effects: a frame that changes objects it did not
            # create needs Dynamo's bytecode after the graph (a break, below);
            # inference: the stored code is the inference graph, served with
            # eager's autograd in any grad mode (magi_aot.compile.grad)
            self._backend = SaveBackend(self.cache_dir, self.model_tag, store_code=True,
                                        strict=True, refuse_side_effects=True, inference=True)
            # what other processes stored stays listed beside this one's
            self._backend.keep_regions = list(self._records)
            self._compiled = self._compile_model()
        be = self._backend
        n0 = len(be.entries)
        be.record_outputs = True
        broke = None
        try:
            with Progress("storing %s" % self.model_tag):
                ret = self._compiled(*args, **kwargs)
            outs = be.last_outputs
        except Exception as e:  # noqa: BLE001 - a graph break, else raised again
            broke = _break_info(e)
            if broke is None:
                raise
        finally:
            be.record_outputs = False
            be.last_outputs = None
        if broke is not None:
            return self._on_break(broke, args, kwargs)
        new = [e for e in be.entries[n0:] if not e.error]
        if len(new) != 1:
            raise _err(-13, "model '%s' traced into %d regions; warm_start binds one region "
                       "per forward" % (self.model_tag, len(new)))
        if outs is None:
            raise _err(-13, "model '%s': the traced region did not run" % self.model_tag)
        tree = self._encode(ret, outs, args, kwargs)
        call = {"args": [_kind(a) for a in args],
                "kwargs": {k: _kind(v) for k, v in kwargs.items()}}
        be.annotate(new[0].model_idx, outputs=tree, call=call)
        first_reason = self.report.get("reason")
        err = self._from_cache(own_code=dict(be.stored_code))
        if err:
            raise _err(-14, "region not found after tracing: %s" % err)
        dt = time.perf_counter() - t
        self.report.update({"served": "traced", "reason": first_reason if why is None else why,
                            "trace_s": dt})
        if announce and len(be.entries) > n0:
            say("stored %s in %.1f s (%s); a new process loads it instead of compiling"
                % (self.model_tag, dt, _what_compiled(be.entries[n0:])))
        return ret

    def _encode(self, ret, outs, args, kwargs):
        return encode_output(ret, outs, args, kwargs)

    def _missed(self, miss, args, kwargs):
        """A call none of the stored code serves: in the process that
        traced, Dynamo recompiles (as under torch.compile); in one that
        loaded stored code, the call is compiled here and stored beside the
        stored code (the dimensions whose size changed taken as dynamic),
        or, with on_miss="raise", refused."""
        self.report["recompiles"].append(str(miss))
        if self._compiled is not None:
            say("%s: recompiling, as torch.compile would: %s" % (self.model_tag, miss))
            return self._trace(args, kwargs, None)
        if self._on_miss() == "raise":
            raise _err(-11, "%s. The stored code cannot serve this call and on_miss='raise' "
                       "(or %s=raise) forbids compiling in this process; trace with this "
                       "input in a process that stores (on_miss='compile', the default), "
                       "mark the dimension dynamic there (torch._dynamo.mark_dynamic), or "
                       "remove the entry (magi-aot cache rm DIR --model %s)"
                       % (miss, ON_MISS_ENV, self.model_tag))
        import torch
        for t, d in miss.varying:
            torch._dynamo.maybe_mark_dynamic(t, d)
        say("%s: the stored code cannot serve this call (%s); compiling it in this process, "
            "as torch.compile would, and storing it beside the stored code%s"
            % (self.model_tag, miss, " (%s taken as dynamic)" % ", ".join(
                "dim %d" % d for _, d in miss.varying) if miss.varying else ""))
        t = time.perf_counter()
        ret = self._trace(args, kwargs, None, announce=False)
        say("%s: compiled and stored in %.1f s the code for a call the stored code did not "
            "serve (%s); the next process serves both" % (self.model_tag,
                                                         time.perf_counter() - t, miss))
        return ret

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._split is not None:
            return self._split(*args, **kwargs)
        args, kwargs, named = self._normalise(args, kwargs)
        if self.fn is None:
            why = self._start()
            if self._split is not None:
                return self._split(*args, **kwargs)
            if why:
                say("storing %s: %s; a one-time compile, about as long as torch.compile"
                    % (self.model_tag, why))
                return self._trace(args, kwargs, why)
        try:
            self._check_call(args, kwargs, named)
            flat = self._check_inputs(args, kwargs, named)
        except _Miss as miss:
            flat = None if self._compiled is not None else \
                self._other_variant(args, kwargs, named)
            if flat is None:
                return self._missed(miss, args, kwargs)
        outs = self.fn(*flat)
        if self._tree is None:
            return outs
        return self._tree.build(outs, args, kwargs)


# ------------------------------------------------------------------ graph breaks
_FIX = ("Remove the break (a data-dependent branch: torch.where or torch.cond; a print or "
        "other Python call: move it out of forward)")


def _break_info(exc):
    """{"reason", "where", "code"} of a graph break Dynamo refused under
    fullgraph (nothing of the call ran), or of a frame the save backend
    refused for its side effects; None for any other error."""
    from torch._dynamo import exc as dx
    inner = getattr(exc, "inner_exception", None)
    if isinstance(exc, dx.BackendCompilerFailed) and isinstance(inner, SideEffectsRefused):
        return {"reason": "changes %s, which Dynamo replays in Python after the graph"
                % ", ".join(inner.sources), "where": None, "code": None}
    if not isinstance(exc, dx.Unsupported):
        return None
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    reason = lines[0] if lines else type(exc).__name__
    stack = getattr(exc, "real_stack", None) or []
    where = code = None
    if stack:
        fs = stack[-1]
        where = "%s:%s" % (fs.filename, fs.lineno)
        code = (fs.line or "").strip() or None
    return {"reason": reason, "where": where, "code": code}


def _describe_break(info):
    if info.get("where"):
        return "has a graph break at %s%s: %s" % (
            info["where"], " (`%s`)" % info["code"] if info.get("code") else "", info["reason"])
    return "cannot be traced as one graph: it %s" % info["reason"]


def _match_key(submodules):
    if submodules is None or submodules is False:
        return None
    if isinstance(submodules, str):
        submodules = [submodules]
    return sorted(str(p) for p in submodules)


def _is_container(m):
    """A ModuleList / ModuleDict: no forward of its own, never called."""
    import torch
    return type(m).forward is torch.nn.Module.forward


def _part_frame(self, *magi_args, **magi_kwargs):
    # the frame Dynamo traces for one bound submodule (a fresh code object
    # per submodule: _frame_for)
    return type(self).forward(self, *magi_args, **magi_kwargs)


def _frame_for(path):
    import types
    name = "forward_of_" + re.sub(r"\W", "_", path)
    code = _part_frame.__code__.replace(co_name=name)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=name)
    return types.FunctionType(code, _part_frame.__globals__, name)


class _Broken(Exception):
    """A submodule that cannot be bound; ret: what its call returned when
    it ran (the save went wrong after the run), else nothing ran."""

    def __init__(self, info, ran=False, ret=None):
        super().__init__(info.get("reason"))
        self.info, self.ran, self.ret = info, ran, ret


class _Part(BoundForward):
    """The bound forward of one submodule of a model served per submodule:
    traced as the frame _part_frame(module, *args, **kwargs), so the
    call's arguments are L['magi_args'] / L['magi_kwargs']; stored under
    the model tag "<model tag>/<qualified name>"."""

    _ARGS, _KWARGS = "magi_args", "magi_kwargs"

    def __init__(self, split, path, module, orig):
        o = split.owner
        super().__init__(module, o.cache_dir, "%s/%s" % (o.model_tag, path), o.transport,
                         o.dynamic, True, o.trust_compiled, o.allow_targets, None, o.on_miss)
        self.split, self.path = split, path
        self._sig = inspect.signature(orig)

    def _compile_model(self):
        import torch
        fn = torch.compile(_frame_for(self.path), backend=self._backend, dynamic=self.dynamic,
                           fullgraph=True)
        m = self.model
        return lambda *a, **k: fn(m, *a, **k)

    def _on_break(self, info, args, kwargs):
        raise _Broken(info)

    def _encode(self, ret, outs, args, kwargs):
        try:
            return encode_output(ret, outs, args, kwargs)
        except MagiError as e:
            raise _Broken({"reason": e.message, "where": None, "code": None}, True, ret)

    def _load_code(self, key, load):
        memo = self.split.code
        if key not in memo:
            memo[key] = load()
        fn, rep = memo[key]
        return fn, dict(rep)


class _Hook:
    """Installed as a bound submodule's forward: inside the model's bound
    call it runs the stored code (tracing it first where nothing is
    stored), elsewhere the module's own forward."""

    def __init__(self, split, path, module, orig):
        self.split, self.path, self.module, self.orig = split, path, module, orig

    def __call__(self, *args, **kwargs):
        if not self.split.active():
            return self.orig(*args, **kwargs)
        return self.split.call_part(self, args, kwargs)


class _Split:
    """A model served per submodule: the model's own forward (and every
    module that broke the graph) runs as Python; each bound submodule's
    call runs its stored region."""

    def __init__(self, owner, match, record=None):
        import threading
        self.owner, self.model, self.match = owner, owner.model, match
        self.parts = {}      # path -> _Part
        self.hooks = {}      # id(module) -> _Hook
        self.breaks = []     # {"module", "reason", "where", "code"}
        self.eager = []      # modules whose forward runs as Python
        self.code = {}       # cache key -> (callable, report): one load per stored code
        self.reason = owner.report.get("reason")
        self._local = threading.local()
        self._dirty = record is None
        if record is not None:
            self.breaks = list(record.get("breaks") or ())
            self.eager = list(record.get("eager") or ())
            for path in record.get("modules") or ():
                self._install(path, self._module(path), load=True)
        elif match is not None:
            self._install_matches()

    # -- which submodules
    def _module(self, path):
        try:
            return self.model.get_submodule(path)
        except AttributeError:
            raise _err(-14, "model '%s': submodule '%s' of the stored split is not in the "
                       "model" % (self.owner.model_tag, path))

    def _install_matches(self):
        import fnmatch
        taken = []
        for path, m in self.model.named_modules():
            if not path or _is_container(m) or any(path.startswith(t + ".") for t in taken):
                continue
            if any(fnmatch.fnmatchcase(path, p) for p in self.match):
                taken.append(path)
                self._install(path, m)
        if not taken:
            raise _err(-14, "model '%s': submodules=%r match no submodule with a forward"
                       % (self.owner.model_tag, self.match))

    def _install(self, path, module, load=False):
        if id(module) in self.hooks or self.owner.model is module:
            return
        if "forward" in vars(module):
            # someone else's instance forward: not ours to replace
            self._children(path, module)
            return
        orig = module.forward
        part = _Part(self, path, module, orig)
        self.parts[path] = part
        hook = self.hooks[id(module)] = _Hook(self, path, module, orig)
        module.forward = hook
        if load:
            why = part._start()
            if why:
                part.report["reason"] = why

    def _children(self, path, module):
        for name, c in module.named_children():
            p = "%s.%s" % (path, name) if path else name
            if _is_container(c):
                self._children(p, c)
            else:
                self._install(p, c)

    def broke(self, path, module, info):
        """module cannot be bound: its forward runs as Python, its children
        are bound instead."""
        hook = self.hooks.pop(id(module), None)
        if hook is not None and vars(module).get("forward") is hook:
            del module.forward
        self.parts.pop(path, None)
        self.breaks.append(dict(info, module=path))
        self.eager.append(path)
        self._dirty = True
        self._children(path, module)

    # -- calls
    def active(self):
        return getattr(self._local, "on", False)

    def call_part(self, hook, args, kwargs):
        part = self.parts.get(hook.path)
        if part is None:   # broke since this hook was found
            return hook.orig(*args, **kwargs)
        try:
            return part(*args, **kwargs)
        except _Broken as b:
            self.broke(hook.path, hook.module, b.info)
            return b.ret if b.ran else hook.orig(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        self._local.on = True
        try:
            ret = self.model(*args, **kwargs)
        finally:
            self._local.on = False
        if not self.parts:
            first = self.breaks[0] if self.breaks else {}
            raise _err(-13, "model '%s' cannot be served: it %s, and no submodule it calls "
                       "traces as one graph (%d breaks: %s). %s, or run it with torch.compile"
                       % (self.owner.model_tag, _describe_break(first) if first else
                          "binds nothing", len(self.breaks),
                          "; ".join("%s: %s" % (b["module"] or "the model", b["reason"])
                                    for b in self.breaks[:4]), _FIX))
        if self._dirty:
            self._publish()
        self.owner.report.update(self.summary())
        return ret

    # -- the record and the report
    def _publish(self):
        import json
        doc = {"model_tag": self.owner.model_tag, "regions": [],
               "split": {"match": self.match, "modules": list(self.parts),
                         "breaks": self.breaks, "eager": self.eager}}
        with _Cache(self.owner.cache_dir) as c:
            c.put(index_key(self.owner.model_tag), json.dumps(doc).encode(), replace=True)
        self._dirty = False

    def summary(self):
        served = [p.report.get("served") for p in self.parts.values()]
        reasons = [p.report.get("reason") for p in self.parts.values() if p.report.get("reason")]
        agg = next((s for s in ("traced", "compiled", None) if s in served), "stored") \
            if served else None
        paths = [p.report.get("code_path") for p in self.parts.values()]
        path_why = ["%s: %s" % (k, p.report["code_path_reason"]) for k, p in self.parts.items()
                    if p.report.get("code_path_reason")]
        return {"served": agg, "reason": self.reason or (reasons[0] if reasons else None),
                # "direct" when every bound submodule's code ran directly, else the first other path
                "code_path": ("direct" if paths and all(x == "direct" for x in paths)
                              else next((x for x in paths if x != "direct"), None)),
                "code_path_reason": path_why[0] if path_why else None,
                "recompiles": ["%s: %s" % (k, r) for k, p in self.parts.items()
                               for r in p.report.get("recompiles") or ()],
                "modules": {k: p.report.get("served") for k, p in self.parts.items()},
                "breaks": list(self.breaks), "eager": list(self.eager)}


ON_MISS_ENV = config.ON_MISS.name   # "raise": a call the stored code cannot serve is refused
ON_MISS = ("compile", "raise")


def _on_miss_value(on_miss):
    """"compile" or "raise": on_miss when given, else MAGI_AOT_ON_MISS,
    else "compile"; ValueError for anything else."""
    v = on_miss if on_miss is not None else config.ON_MISS.get()
    if v not in ON_MISS:
        raise ValueError("on_miss must be 'compile' or 'raise'%s, not %r" % (
            "" if on_miss is not None else " (from %s)" % ON_MISS_ENV, v))
    return v


def _what_compiled(entries):
    n = sum(1 for e in entries if not e.error)
    secs = sum(e.compile_seconds or 0 for e in entries)
    return "%d region%s, %.1f s of it Inductor's compile" % (n, "" if n == 1 else "s", secs)


def warm_start(model: "torch.nn.Module", cache_dir: "Union[str, os.PathLike[str]]", model_tag: str, *,
               transport: Optional[str] = None, dynamic: Optional[bool] = None, load_now: bool = True,
               trust_compiled: Optional[bool] = None, allow_targets: Iterable[str] = (),
               submodules: Union[None, bool, Iterable[str]] = None,
               on_miss: Optional[str] = None) -> "BoundForward":
    """A BoundForward for `model` from the region stored under model_tag in
    cache_dir (see the module doc): fwd(*args, **kwargs) returns what
    model(*args, **kwargs) returns. dynamic: torch.compile's, for the trace
    (None: static first, a dimension made dynamic when a later call changes
    it; mark_dynamic on inputs is honoured). load_now: read and load the
    stored code now (errors such as a missing parameter surface here)
    rather than on the first call. trust_compiled: load stored code even
    from a cache others can write (default: MAGI_AOT_TRUST_COMPILED=1;
    otherwise such a region is compiled from its graph and
    report["reason"] says why). allow_targets: graph targets past the
    loader's allow-list (magi_aot.fx.targets). submodules: how a model whose
    forward has graph breaks is served (see "Graph breaks" in the module
    doc): None binds the largest submodules whose forwards trace as one
    graph, False refuses such a model naming the break, a list of
    qualified-name patterns ("model.layers.*", fnmatch) binds the largest
    matching submodules whatever the model's own forward does.
    on_miss: what a process that loaded stored code does with a call that
    code cannot serve (a new size, another configuration of the model
    under the same tag): "compile" (the default) compiles it in this
    process as torch.compile would, serves it and stores it beside the
    stored code, saying so once with the reason and the time it took;
    "raise" refuses it with MAGI_ERR_MISMATCH naming the input (a
    deployment that must never compile). None: MAGI_AOT_ON_MISS as this
    call finds it, else "compile"."""
    b = BoundForward(model, cache_dir, model_tag, transport, dynamic, True, trust_compiled,
                     allow_targets, submodules, on_miss)
    if load_now:
        why = b._start()
        if why:
            b.report["reason"] = why
    return b
