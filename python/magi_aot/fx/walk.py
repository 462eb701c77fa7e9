"""The graph walk: torch.fx.GraphModule -> magi-fx JSON v1 document (dict).

Only metadata is read: for a tensor its dtype, shape, stride, storage
offset, device, requires_grad and layout. Tensor data is never touched, so
the walk is safe on FakeTensors, meta tensors, DTensors and real parameters
alike, and costs O(nodes).

Symbolic sizes (SymInt/SymBool/SymFloat) are written as the expressions
torch prints (`1024*s27`, `((s17 + s77)//2)`); every free symbol met is
recorded under "symbols" with its size hint from the ShapeEnv (null for
unbacked symbols without one).
"""
import math
import warnings

from . import dtensor as _dtensor
from . import targets as _targets
from .._torch_required import require_torch
from .rebuild import resolve_target

__all__ = ["graph_to_doc", "target_name", "UnresolvableTarget", "UnrebuildableRegion", "rebuild_problems"]


class UnresolvableTarget(UserWarning):
    """A call_function target the loader will not be able to import."""


class UnrebuildableRegion(UserWarning):
    """A saved region holds something a load cannot rebuild (rebuild_problems)."""


def _opaque_paths(v, path):
    if isinstance(v, list):
        for i, x in enumerate(v):
            yield from _opaque_paths(x, "%s[%d]" % (path, i))
    elif isinstance(v, dict) and len(v) == 1:
        (tag, x), = v.items()
        if tag == "opaque":
            yield "%s: an object of type %s" % (path, x)
        elif tag in ("tuple", "slice"):
            for i, y in enumerate(x):
                yield from _opaque_paths(y, "%s[%d]" % (path, i))
        elif tag == "dict":
            for k, y in x.items():
                yield from _opaque_paths(y, "%s[%r]" % (path, k))


def rebuild_problems(doc):
    """What a load could not rebuild from a magi-fx document, one line per
    node ("node 'x': ...", "subgraph 'g': node 'x': ..." inside a saved
    subgraph): arguments the writer could only keep as opaque type names,
    get_attr / call_module nodes (the module's attributes are not in the
    artifact) except a get_attr of a saved subgraph, placeholders of the
    region's graph without a tensor or scalar example. Empty when every
    node can be rebuilt."""
    subs = doc.get("subgraphs") or {}
    out = []
    graphs = [("", doc["graph"]["nodes"])]
    graphs += [("subgraph '%s': " % k, subs[k]["nodes"]) for k in sorted(subs)]
    for where, nodes in graphs:
        for n in nodes:
            name = where + "node '%s'" % n["name"]
            for p in _opaque_paths(n.get("args", []), "args"):
                out.append("%s: %s" % (name, p))
            for p in _opaque_paths([(n.get("kwargs") or {}).get(k) for k in (n.get("kwargs") or {})], "kwargs"):
                out.append("%s: %s" % (name, p))
            if n["op"] == "get_attr" and n.get("target") in subs:
                pass  # a saved subgraph: rebuilt as an attribute of the module
            elif n["op"] in ("get_attr", "call_module"):
                out.append("%s: %s %s needs the module's attributes, which are not saved"
                           % (name, n["op"], n.get("target")))
            if n["op"] == "placeholder" and not where:
                ex = (n.get("meta") or {}).get("example_value")
                if ex is None or ex.get("kind") in ("opaque", "tuple", "list"):
                    out.append("%s: placeholder without a tensor or scalar example" % name)
    return out

FORMAT = "magi-fx-json"
VERSION = 1


def _torch():
    return require_torch("magi_aot.fx")


def target_name(node, cache=None):
    """The spec's target string of an fx node. For a call_function, a name
    the loader resolves to the same object (magi_aot.fx.targets.name_of); when
    none exists, the object's own module.qualname and an
    UnresolvableTarget warning naming the node. `cache` (a dict) memoises
    names per target object within one walk."""
    t = node.target
    if node.op != "call_function":
        return str(t)
    if cache is not None and id(t) in cache:
        return cache[id(t)][1]
    name = _call_target_name(node)
    if cache is not None:
        cache[id(t)] = (t, name)  # keep t alive: its id stays unique
    return name


def _call_target_name(node):
    torch = _torch()
    t = node.target
    if node.op != "call_function":
        return str(t)
    ops = torch._ops
    if isinstance(t, ops.OpOverload):
        ns, op = t._schema.name.split("::", 1)
        return "torch.ops.%s.%s.%s" % (ns, op, t._overloadname)
    if isinstance(t, ops.OpOverloadPacket):
        ns, op = t._qualified_op_name.split("::", 1)
        return "torch.ops.%s.%s" % (ns, op)
    if isinstance(t, ops.HigherOrderOperator):
        return "torch.ops.higher_order.%s" % t.name()
    name = _targets.name_of(t)
    if name is not None:
        return name
    qual = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    if qual is None:  # a callable object: name its type, never its address
        qual = type(t).__qualname__
        mod = type(t).__module__
    else:
        mod = getattr(t, "__module__", None)
    if mod == "_operator":
        mod = "operator"
    text = "%s.%s" % (mod, qual) if mod else qual
    if not _loader_resolves(text):
        warnings.warn("node '%s': call_function target %r has no importable name (recorded "
                      "as '%s'); the loaded region cannot be rebuilt as a GraphModule"
                      % (node.name, t, text), UnresolvableTarget, stacklevel=3)
    return text


def _loader_resolves(text):
    """Whether rebuild.resolve_target accepts `text` (its stand-ins for
    function-local helpers included)."""
    try:
        resolve_target(text, allow=("*",))   # whether it names anything at all
        return True
    except Exception:  # noqa: BLE001 - any failure means the loader cannot
        return False


class _Walk:
    def __init__(self):
        torch = _torch()
        self.torch = torch
        self.hints = {}
        self.target_names = {}
        self._scalar_types = (torch.SymInt, torch.SymFloat, torch.SymBool)

    # ---- symbols
    def _note_symbols(self, node, expr):
        for s in expr.free_symbols:
            name = str(s)
            if name in self.hints:
                continue
            self.hints[name] = self._hint(node, s, name)

    @staticmethod
    def _hint(node, sym, name):
        env = getattr(node, "shape_env", None)
        if env is None:
            return None
        # torch >= 2.10 names the backed table backed_var_to_val (var_to_val
        # is a deprecated alias there); older releases only have var_to_val.
        backed = getattr(env, "backed_var_to_val", None)
        if backed is None:
            backed = getattr(env, "var_to_val", None) or {}
        for table in (backed, getattr(env, "unbacked_var_to_val", None) or {}):
            v = table.get(sym)
            if v is None:
                continue
            try:
                if getattr(v, "is_Float", False) or isinstance(v, float) or \
                        getattr(sym, "is_integer", None) is False:
                    f = float(v)  # a float symbol's hint (zf0)
                    return f if math.isfinite(f) else None
                return int(v)
            except (TypeError, ValueError):
                return None
        return None

    def expr(self, s):
        """A SymInt/SymFloat/SymBool as an int/bool constant or EXPR text."""
        node = s.node
        try:
            c = node.maybe_as_int() if isinstance(s, self.torch.SymInt) else None
        except Exception:
            c = None
        if c is not None:
            return int(c)
        e = getattr(node, "expr", None)
        if e is None:  # nested ints and other non-sympy nodes
            return str(s)
        if isinstance(s, self.torch.SymInt) and getattr(e, "is_number", False):
            return int(e)
        self._note_symbols(node, e)
        return str(e)

    def dim(self, x):
        if isinstance(x, self.torch.SymInt):
            return self.expr(x)
        return int(x)

    # ---- example values
    def example(self, v):
        torch = self.torch
        if v is None:
            return {"kind": "none"}
        if isinstance(v, torch.Tensor):
            strided = v.layout == torch.strided
            d = {"kind": "tensor",
                 "dtype": str(v.dtype).replace("torch.", ""),
                 "shape": [self.dim(x) for x in v.shape],
                 "stride": None, "storage_offset": 0,
                 "device": str(v.device),
                 "requires_grad": bool(v.requires_grad)}
            if strided:
                d["stride"] = [self.dim(x) for x in v.stride()]
                try:
                    d["storage_offset"] = self.dim(v.storage_offset())
                except Exception:  # wrapper subclasses without a storage
                    d["storage_offset"] = 0
            else:
                d["layout"] = str(v.layout).replace("torch.", "")
            if _dtensor.is_dtensor(v):  # global shape above; the mesh and placements here
                d["dtensor"] = _dtensor.dtensor_spec(v)
            return d
        if isinstance(v, torch.SymInt):
            return {"kind": "symint", "expr": self.expr(v)}
        if isinstance(v, torch.SymBool):
            e = self.expr(v)
            return {"kind": "symbool", "expr": e if isinstance(e, str) else str(bool(e))}
        if isinstance(v, torch.SymFloat):
            return {"kind": "symfloat", "expr": str(self.expr(v))}
        if isinstance(v, bool):
            return {"kind": "bool", "value": v}
        if isinstance(v, int):
            return {"kind": "int", "value": int(v)}
        if isinstance(v, float):
            return {"kind": "float", "value": _float(v)}
        if isinstance(v, (tuple, list)):
            return {"kind": "tuple" if isinstance(v, tuple) else "list",
                    "items": [self.example(x) for x in v]}
        return {"kind": "opaque", "repr": type(v).__name__}

    # ---- argument values
    def value(self, a):
        torch = self.torch
        if isinstance(a, torch.fx.Node):
            return {"node": a.name}
        if a is None or isinstance(a, (bool, str)):
            return a
        if isinstance(a, int):
            return int(a)
        if isinstance(a, float):
            return _float(a)
        if isinstance(a, torch.SymInt):
            return {"sym": self.expr(a)}
        if isinstance(a, tuple):
            return {"tuple": [self.value(x) for x in a]}
        if isinstance(a, list):
            return [self.value(x) for x in a]
        if isinstance(a, dict):
            return {"dict": {str(k): self.value(x) for k, x in a.items()}}
        if isinstance(a, slice):
            return {"slice": [self.value(a.start), self.value(a.stop), self.value(a.step)]}
        if isinstance(a, torch.dtype):
            return {"dtype": str(a).replace("torch.", "")}
        if isinstance(a, torch.device):
            return {"device": str(a)}
        if isinstance(a, torch.layout):
            return {"layout": str(a).replace("torch.", "")}
        if isinstance(a, torch.memory_format):
            return {"memory_format": str(a).replace("torch.", "")}
        if a is Ellipsis:
            return {"ellipsis": True}
        if _dtensor.is_placement(a):
            return {"placement": _dtensor.placement_text(a)}
        return {"opaque": type(a).__name__}

    def node(self, n):
        d = {"name": n.name, "op": n.op, "target": target_name(n, self.target_names)}
        if n.op == "placeholder":
            kind = input_kind(n)
            if kind is not None:
                d["input_kind"] = kind
        if n.op != "placeholder" or n.args:
            d["args"] = [self.value(a) for a in n.args]
        if n.kwargs:
            d["kwargs"] = {str(k): self.value(v) for k, v in n.kwargs.items()}
        meta = n.meta
        key = "example_value" if "example_value" in meta else ("val" if "val" in meta else None)
        if key is not None:
            d["meta"] = {"example_value": self.example(meta[key])}
        return d


def _source_name(src):
    name = getattr(src, "name", None)
    try:
        return name() if callable(name) else str(name)
    except Exception:  # a source that cannot name itself: unknown
        return None


def input_kind(node):
    """What a Dynamo placeholder stands for: "param" (a module parameter),
    "buffer" (a module buffer, or another tensor Dynamo treats as a static
    input), "input" (anything else: activations, user inputs, sizes).

    Read from the GraphArg's source when Dynamo leaves it in
    node.meta["grapharg"], else from what it leaves on every version: the
    example is an nn.Parameter (params), or tensor_dict carries
    _dynamo_static_input_type (params and buffers). None for a graph that
    is not Dynamo's (no example_value): the loader then judges by the name."""
    torch = _torch()
    meta = node.meta
    ga = meta.get("grapharg")
    if ga is not None:
        src = _source_name(getattr(ga, "source", None)) or ""
        if "._parameters[" in src:
            return "param"
        if "._buffers[" in src:
            return "buffer"
    if "example_value" not in meta:
        return None
    if isinstance(meta["example_value"], torch.nn.Parameter):
        return "param"
    if "_dynamo_static_input_type" in (meta.get("tensor_dict") or {}):
        return "buffer"
    return "input"


def _float(f):
    if math.isnan(f):
        return {"float": "nan"}
    if math.isinf(f):
        return {"float": "inf" if f > 0 else "-inf"}
    return f


def graph_to_doc(gm, *, model_tag, model_idx=0, traced_files=(), compile_config=None):
    """The magi-fx JSON v1 document of `gm` (a GraphModule or a torch.fx.Graph).

    Node metadata comes from node.meta["example_value"] (Dynamo) or, when
    absent, node.meta["val"] (AOT/export graphs). Never reads tensor data."""
    graph = getattr(gm, "graph", gm)
    w = _Walk()
    nodes = [w.node(n) for n in graph.nodes]
    subgraphs = {}
    if graph is not gm:
        _walk_subgraphs(w, gm, graph, nodes, "", subgraphs, 1)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "model_tag": str(model_tag),
        "model_idx": int(model_idx),
        "traced_files": [str(f) for f in traced_files],
        "compile_config": {} if compile_config is None else compile_config,
        "symbols": {k: {"hint": w.hints[k]} for k in sorted(w.hints)},
        "graph": {"nodes": nodes},
    }
    if subgraphs:
        doc["subgraphs"] = {k: subgraphs[k] for k in sorted(subgraphs)}
    return doc


SUBGRAPH_DEPTH_MAX = 8  # MAGI_SUBGRAPH_DEPTH_MAX: the readers refuse deeper nesting


def _walk_subgraphs(w, owner, graph, docnodes, prefix, out, level):
    """Record every GraphModule attribute of `owner` that a get_attr node of
    `graph` reads (a higher-order operator's callable: flex attention's
    score_mod / mask_mod, cond's branches, invoke_subgraph's body) as a
    subgraph, and the ones they read in turn. One name space for all of
    them: a subgraph read from the region's graph keeps its attribute name
    ("score_mod_0"); one read from inside subgraph P is named "P.NAME",
    and that get_attr node's target is written as "P.NAME" too (fx resolves
    the dotted path on the rebuilt module)."""
    torch = w.torch
    for n, d in zip(graph.nodes, docnodes):
        if n.op != "get_attr" or not isinstance(n.target, str):
            continue
        try:
            sub = _attr(owner, n.target)
        except AttributeError:
            continue
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        key = prefix + n.target
        d["target"] = key
        if key in out:
            continue
        if level > SUBGRAPH_DEPTH_MAX:
            raise ValueError("subgraph '%s' is nested more than %d levels deep (limit)"
                             % (key, SUBGRAPH_DEPTH_MAX))
        subnodes = [w.node(m) for m in sub.graph.nodes]
        out[key] = {"nodes": subnodes}
        _walk_subgraphs(w, sub, sub.graph, subnodes, key + ".", out, level + 1)


def _attr(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
