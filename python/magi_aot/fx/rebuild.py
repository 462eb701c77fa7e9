"""Rebuild a torch.fx.GraphModule from a loaded region (no Dynamo, no source).

Together with Region.fake_inputs() this lets a backend recompile a region
from the artifact alone:

    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    gm = region.graph_module()
    args = region.fake_inputs(fake_mode)
    compiled = my_backend(gm, args)

Targets are resolved from their spec strings by
magi_aot.fx.targets.resolve_allowed: `torch.ops.NS.OP[.OVERLOAD]`,
`torch.ops.higher_order.NAME`, and `module.path` callables, each checked
against the loader's allow-list (torch operators and tensor functions,
operator, math, a few builtins, tensor methods; magi_aot.fx.targets) before
anything is imported, since a target string is data and calling it is
code; `allow_targets` (or MAGI_AOT_ALLOW_TARGETS) opts more in. A target
off the list is refused with MagiError MAGI_ERR_UNSUPPORTED naming the
node and the target; so is a call_method of a private name
(`__class__`, `__reduce_ex__`: only public methods and operator dunders)
and a getattr of one. An operator that a Python module registers (a model
library's custom op, torchvision's kernels) is looked up again after
importing its namespace and the modules of the region's traced source
files, when those modules are opted in. Dynamo's DTensor helper
`...method_to_local.<locals>.to_local_fn_with_prim_types` (a closure over
the constant arguments of `DTensor.to_local`) becomes `to_local` below, and
`torch.ops.magi.*` (the rewritten gathers) registers magi_aot.runtime.ops first. Any
other function local to a function (`...<locals>...`), a
call_module or a get_attr of anything but a saved subgraph (the graph
would need the module's attributes) or an opaque argument cannot be rebuilt: the call raises MagiError
MAGI_ERR_UNSUPPORTED naming the node.

`localize(region)` is the rank-local view a runtime runs (done by the C
library, as a load with rank= and world= does): DTensor placeholders
(recorded with their global shape, used through `to_local`) take the local
shard's metadata, so fake inputs, the plan and the real inputs are all
local shards.
"""
from . import expr as _expr
from . import dtensor as _dtensor
from . import targets as _targets
from .._lib import MagiError
from .._torch_required import require_torch

__all__ = ["graph_module", "resolve_target", "run_fake", "to_local", "localize", "TO_LOCAL"]

TO_LOCAL = "magi.to_local"   # the document target of to_local (fx.targets.DOC_TARGETS)


def to_local(x, *args, **kwargs):
    """Stand-in for Dynamo's function-local `to_local_fn_with_prim_types`,
    which calls `x.to_local(*consts)` with the constant arguments baked into
    the closure (they are not in the graph). Those arguments
    (grad_placements, async_output) only shape the backward and the wait,
    never the forward value, which is the DTensor's local tensor. So:
    a DTensor gives `x.to_local(*args, **kwargs)`; a plain tensor is taken
    to be the local shard already (the rank-local graph of `localize`) and
    is returned as is."""
    to_local_method = getattr(type(x), "to_local", None)
    if to_local_method is not None and callable(to_local_method):
        return x.to_local(*args, **kwargs)
    return x


def localize(region, *, rank=None, world=None):
    """The rank-local form of `region`, as rank `rank` of `world` runs it
    (the C library's magi_localize_rank, the pass a load with rank= and
    world= runs): every placeholder read through to_local becomes that
    rank's local shard (dtype as traced; shape from its DTensor spec and
    the rank, whichever rank traced), and every to_local node becomes a
    call of `to_local` above. Without rank and world: the tracing rank's
    view (each placeholder takes its to_local node's example as traced). A new Region (its `source` is the
    region given); raises MagiError MAGI_ERR_UNSUPPORTED naming the
    placeholder when one is also used other than through to_local, or by
    to_local nodes that disagree."""
    return region.localized(rank, world)


def _is_rank_local(region):
    """Loaded for a rank (load(..., rank=, world=)) or localize()d."""
    loaded = getattr(region, "loaded", None)
    return bool(getattr(loaded, "rank_local", False)) or getattr(region, "source", None) is not None


def _unsupported(node, why):
    return MagiError(-13, "node '%s': %s" % (node["name"], why), "graph_module")


def resolve_target(text, import_files=(), allow=()):
    """The callable a call_function target string names (see module doc and
    magi_aot.fx.targets, which the fx walk uses to pick names that resolve).
    import_files: source files whose modules may register a missing
    torch.ops operator (graph_module passes the region's traced_files;
    imported only when opted in). allow: opt-ins past the allow-list
    (magi_aot.fx.targets.resolve_allowed); a name off it raises
    magi_aot.fx.targets.TargetRefused (a LookupError)."""
    require_torch("magi_aot.resolve_target()")
    parts = text.split(".") if isinstance(text, str) else []
    if "<locals>" in parts and parts[-1].startswith("to_local") and any(
            p.endswith("to_local") for p in parts[:-2]):
        return to_local  # Dynamo's DTensor.to_local helper (see to_local)
    if parts[:3] == ["torch", "ops", "magi"]:  # the rewritten gathers: magi_aot.runtime.ops
        from ..runtime.ops import register
        register()
    return _targets.resolve_allowed(text, import_files, allow)


def graph_module(region, *, symbol_values=None, allow_targets=()):
    """A torch.fx.GraphModule equal to the region's graph (names, opcodes,
    targets, args, kwargs, and meta["example_value"] as the spec dict under
    meta["magi_example"]). Each saved subgraph a get_attr node names (a
    higher-order operator's score_mod, mask_mod, cond branch, ...) is
    rebuilt the same way as a GraphModule and registered on the module
    that reads it under the get_attr target, so the operator call runs. {"sym": EXPR} arguments need symbol_values
    (saved name -> SymInt/int; default region.symbol_map from fake_inputs).
    allow_targets: opt-ins past the loader's allow-list (module doc)."""
    torch = require_torch("magi_aot.graph_module()")
    import torch.fx as fx

    rank_local = _is_rank_local(region)
    for p in region.nodes:
        ex = (p.get("meta") or {}).get("example_value") or {}
        if p["op"] == "placeholder" and isinstance(ex, dict) and "dtensor" in ex and not rank_local:
            raise _unsupported(p, "a DTensor (global shape %s, placements %s on mesh %s): the graph as "
                               "traced needs its device mesh and cannot be rebuilt faithfully alone; "
                               "rebuild the rank-local form: rebuild.localize(region), a load with "
                               "rank= and world=, or a SymmRuntime"
                               % (ex.get("shape"), ex["dtensor"].get("placements"),
                                  ex["dtensor"].get("mesh_shape")))
    syms = symbol_values if symbol_values is not None else (region.symbol_map or {})
    everything = _targets.allows_everything(allow_targets)
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
        if tag == "placement":
            return _dtensor.placement_object(x)
        if tag == "sym":
            if isinstance(x, int):
                return x
            try:
                return _Ints().build(_expr.parse(x))
            except KeyError as e:
                raise _unsupported(node, "symbolic argument %s needs symbol %s (call "
                                   "fake_inputs() first or pass symbol_values)" % (x, e))
        raise _unsupported(node, "argument %s cannot be rebuilt" % v)

    subs = region.doc.get("subgraphs") or {}
    built = {}  # subgraph name -> its GraphModule (one object per name)

    def subgraph(n, name, path):
        if name in built:
            return built[name]
        if name in path or len(path) >= _SUBGRAPH_DEPTH_MAX:
            raise _unsupported(n, "subgraph '%s' calls itself or nests more than %d levels deep"
                               % (name, _SUBGRAPH_DEPTH_MAX))
        gm = build(subs[name]["nodes"], path + (name,), "MagiSubgraph")
        built[name] = gm
        return gm

    def build(nodes, path, class_name):
        g = fx.Graph()
        env.clear()
        attrs = {}
        for n in nodes:
            op = n["op"]
            args = tuple(val(n, a) for a in n.get("args", []))
            kwargs = {k: val(n, a) for k, a in (n.get("kwargs") or {}).items()}
            if op == "placeholder":
                node = g.placeholder(n["name"])
                node.target = n["target"]
                if args:
                    node.args = args
                ex = (n.get("meta") or {}).get("example_value")
                if isinstance(ex, dict) and "dtensor" in ex:
                    # rank-local: the rank's local tensor comes in, the
                    # graph (a redistribute the lowering kept) reads the DTensor
                    node.meta["magi_name"] = n["name"]
                    node.meta["magi_example"] = ex
                    env[n["name"]] = g.create_node(
                        "call_function", _dtensor.as_dtensor,
                        (node, ex["dtensor"], list(ex["shape"]), ex.get("stride")),
                        name=n["name"] + "__dtensor")
                    continue
            elif op == "output":
                node = g.output(args[0] if args else None)
            elif op == "call_function":
                try:
                    fn = resolve_target(n["target"], region.traced_files, allow_targets)
                except _targets.TargetRefused as e:
                    raise _unsupported(n, "target refused: %s" % e)
                except (LookupError, AttributeError) as e:
                    raise _unsupported(n, "target %s cannot be resolved: %s" % (n["target"], e))
                if fn is getattr and not everything:
                    name = args[1] if len(args) > 1 else None
                    if not _targets.attribute_allowed(name):
                        raise _unsupported(n, "target refused: builtins.getattr of %r: only a public "
                                           "data attribute of a tensor or value type, named by a "
                                           "constant (allow_targets=['*'] allows any)" % (name,))
                node = g.create_node("call_function", fn, args, kwargs, name=n["name"])
            elif op == "call_method":
                if not everything and not _targets.method_allowed(n["target"]):
                    raise _unsupported(n, "target refused: call_method %r: only the public methods "
                                       "and operator dunders of tensors and value types "
                                       "(allow_targets=['*'] allows any)"
                                       % (n["target"],))
                node = g.create_node("call_method", n["target"], args, kwargs, name=n["name"])
            elif op == "get_attr" and n.get("target") in subs:
                saved = dict(env)  # the subgraph is a graph of its own
                attrs[n["target"]] = subgraph(n, n["target"], path)
                env.clear()
                env.update(saved)
                node = g.create_node("get_attr", n["target"], name=n["name"])
            else:
                raise _unsupported(n, "%s nodes need the module's attributes" % op)
            node.meta["magi_name"] = n["name"]  # fx may rename to avoid a clash
            meta = (n.get("meta") or {}).get("example_value")
            if meta is not None:
                node.meta["magi_example"] = meta
            env[n["name"]] = node
        g.lint()
        return fx.GraphModule(attrs if attrs else torch.nn.Module(), g, class_name=class_name)

    return build(region.nodes, (), "MagiRegion_%s" % region.model_tag)


_SUBGRAPH_DEPTH_MAX = 8  # as the library's readers (MAGI_SUBGRAPH_DEPTH_MAX)


def run_fake(region, fake_mode=None, *, device=None, allow_targets=()):
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
    gm = graph_module(region, allow_targets=allow_targets)
    with fake_mode, enable_python_dispatcher():
        out = gm(*args)
    return out, fake_mode, args
