"""Rebuild a torch.fx.GraphModule from a loaded region (no Dynamo, no source).

Together with Region.fake_inputs() this lets a backend recompile a region
from the artifact alone:

    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    gm = region.graph_module()
    args = region.fake_inputs(fake_mode)
    compiled = my_backend(gm, args)

Targets are resolved from their spec strings by magi_aot.targets.resolve:
`torch.ops.NS.OP[.OVERLOAD]`, `torch.ops.higher_order.NAME`, and
`module.path` callables (the longest importable module, then attribute
lookups); the fx walk records names that resolve to the traced object
(magi_aot.targets.name_of). An operator that a Python module registers
(a model library's custom op, torchvision's kernels) is looked up again
after importing its namespace and the modules of the region's traced
source files. A target that names a function local to another
function (`...<locals>...`), a call_module/get_attr (the graph would need
the module's attributes) or an opaque argument cannot be rebuilt: the call
raises MagiError MAGI_ERR_UNSUPPORTED naming the node.
"""
from . import _expr
from . import targets as _targets
from ._lib import MagiError
from ._torch_required import require_torch

__all__ = ["graph_module", "resolve_target", "run_fake"]


def _unsupported(node, why):
    return MagiError(-13, "node '%s': %s" % (node["name"], why), "graph_module")


def resolve_target(text, import_files=()):
    """The callable a call_function target string names (see module doc and
    magi_aot.targets, which the fx walk uses to pick names that resolve).
    import_files: source files whose modules may register a missing
    torch.ops operator (graph_module passes the region's traced_files)."""
    require_torch("magi_aot.resolve_target()")
    return _targets.resolve(text, import_files)


def graph_module(region, *, symbol_values=None):
    """A torch.fx.GraphModule equal to the region's graph (names, opcodes,
    targets, args, kwargs, and meta["example_value"] as the spec dict under
    meta["magi_example"]). {"sym": EXPR} arguments need symbol_values
    (saved name -> SymInt/int; default region.symbol_map from fake_inputs)."""
    torch = require_torch("magi_aot.graph_module()")
    import torch.fx as fx

    syms = symbol_values if symbol_values is not None else (region.symbol_map or {})
    g = fx.Graph()
    env = {}

    class _Ints(_expr.Algebra):
        def sym(self, name):
            if name not in syms:
                raise KeyError(name)
            return syms[name]

    def val(node, v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [val(node, x) for x in v]
        (tag, x), = v.items()
        if tag == "node":
            return env[x]
        if tag == "tuple":
            return tuple(val(node, y) for y in x)
        if tag == "dict":
            return {k: val(node, y) for k, y in x.items()}
        if tag == "slice":
            return slice(*(val(node, y) for y in x))
        if tag == "dtype":
            return getattr(torch, x)
        if tag == "device":
            return torch.device(x)
        if tag == "layout":
            return getattr(torch, x)
        if tag == "memory_format":
            return getattr(torch, x)
        if tag == "float":
            return float(x)
        if tag == "ellipsis":
            return Ellipsis
        if tag == "sym":
            if isinstance(x, int):
                return x
            try:
                return _Ints().build(_expr.parse(x))
            except KeyError as e:
                raise _unsupported(node, "symbolic argument %s needs symbol %s (call "
                                   "fake_inputs() first or pass symbol_values)" % (x, e))
        raise _unsupported(node, "argument %s cannot be rebuilt" % v)

    for n in region.nodes:
        op = n["op"]
        args = tuple(val(n, a) for a in n.get("args", []))
        kwargs = {k: val(n, a) for k, a in (n.get("kwargs") or {}).items()}
        if op == "placeholder":
            node = g.placeholder(n["name"])
            node.target = n["target"]
            if args:
                node.args = args
        elif op == "output":
            node = g.output(args[0] if args else None)
        elif op == "call_function":
            try:
                fn = resolve_target(n["target"], region.traced_files)
            except (LookupError, AttributeError) as e:
                raise _unsupported(n, "target %s cannot be resolved: %s" % (n["target"], e))
            node = g.create_node("call_function", fn, args, kwargs, name=n["name"])
        elif op == "call_method":
            node = g.create_node("call_method", n["target"], args, kwargs, name=n["name"])
        else:
            raise _unsupported(n, "%s nodes need the module's attributes" % op)
        node.meta["magi_name"] = n["name"]  # fx may rename to avoid a clash
        meta = (n.get("meta") or {}).get("example_value")
        if meta is not None:
            node.meta["magi_example"] = meta
        env[n["name"]] = node
    g.lint()
    return fx.GraphModule(torch.nn.Module(), g, class_name="MagiRegion_%s" % region.model_tag)


def run_fake(region, fake_mode=None, *, device=None):
    """Rebuild the graph and its fake inputs from `region` alone and run it
    under the FakeTensorMode, with the Python dispatcher enabled as Dynamo
    and make_fx do (ops such as pad with SymInt arguments only reach their
    symbolic decompositions through it). Returns (outputs, fake_mode, args).
    A quick check that a backend can recompile the region as loaded."""
    require_torch("magi_aot.run_fake()")
    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    if fake_mode is None:
        fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    args = region.fake_inputs(fake_mode, device=device)
    gm = graph_module(region)
    with fake_mode, enable_python_dispatcher():
        out = gm(*args)
    return out, fake_mode, args
