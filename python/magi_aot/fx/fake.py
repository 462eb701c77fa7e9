"""Rebuild a region's inputs as FakeTensors / SymInts from its metadata.

A backend that recompiles a loaded region needs example inputs with the
same dtype, shape, stride and *symbolic structure* as the ones Dynamo traced
with, but no data. fake_inputs() creates, in a ShapeEnv:

  - one backed symbol per saved symbol with a hint (DimDynamic.DYNAMIC, so
    two symbols with equal hints stay distinct, and 0/1 hints are not
    specialised), carrying that hint;
  - one unbacked symbol per saved symbol with a null hint or an unbacked
    name (u0, u1, ...);

then evaluates every shape/stride/offset expression of the placeholders
with SymInt arithmetic (so `1024*s27` becomes a SymInt whose expression is
1024 times the new symbol), and creates the tensors with empty_strided
inside the FakeTensorMode. The new symbols get the ShapeEnv's own names;
Region.symbol_map maps each saved name to its SymInt.
"""
import re

from . import expr as _expr
from .._lib import MagiError
from .._torch_required import require_torch

_UNBACKED = re.compile(r"^u\d+$")
# torch names float symbols zf<N> (backed) and zuf<N> (unbacked)
_FLOAT = re.compile(r"^zu?f\d+$")
_UNBACKED_FLOAT = re.compile(r"^zuf\d+$")

__all__ = ["fake_inputs"]


class _SymAlgebra(_expr.Algebra):
    def __init__(self, torch, symmap):
        self.torch = torch
        self.symmap = symmap

    def sym(self, name):
        try:
            return self.symmap[name]
        except KeyError:
            raise MagiError(-4, "symbol '%s' is not in the region's symbol table" % name)

    def max(self, a, b):
        return self.torch.sym_max(a, b)

    def min(self, a, b):
        return self.torch.sym_min(a, b)

    def ite(self, c, a, b):
        return self.torch.sym_ite(c, a, b)

    def trunc(self, x):
        return self.torch.sym_int(x)

    def to_float(self, x):
        return self.torch.sym_float(x)


def _make_symbols(torch, env, symbols):
    import contextlib
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    out = {}
    # Unbacked symbols created here are inputs, not outputs of some op, so
    # they must not wait in the ShapeEnv's "fresh unbacked" list for an op
    # to bind them.
    quiet = getattr(env, "ignore_fresh_unbacked_symbols", None)
    for name in sorted(symbols):
        hint = symbols[name]
        if isinstance(hint, float) or _FLOAT.match(name):
            # a float symbol (SymFloat): unbacked without a hint
            if hint is None or _UNBACKED_FLOAT.match(name):
                with (quiet() if quiet else contextlib.nullcontext()):
                    out[name] = env.create_unbacked_symfloat()
                continue
            src = ConstantSource("magi_aot_%s" % name)
            sym = env.create_symbol(float(hint), source=src, dynamic_dim=DimDynamic.DYNAMIC,
                                    positive=None)
            out[name] = env.create_symfloatnode(sym, hint=float(hint), source=src)
            continue
        # Unbacked symbols (torch names them u0, u1, ...) stay unbacked even
        # when the producer knew a value for them: a backend must not
        # specialise on it.
        if hint is None or _UNBACKED.match(name):
            with (quiet() if quiet else contextlib.nullcontext()):
                out[name] = env.create_unbacked_symint()
            continue
        src = ConstantSource("magi_aot_%s" % name)
        sym = env.create_symbol(int(hint), source=src, dynamic_dim=DimDynamic.DYNAMIC,
                                positive=True if hint >= 0 else None,
                                do_not_specialize_zero_one=True)
        out[name] = env.create_symintnode(sym, hint=int(hint), source=src)
    return out


def _value(v):
    if isinstance(v, dict) and "float" in v:
        return float(v["float"])
    return v


def fake_inputs(region, fake_mode=None, *, device=None):
    """List of fake inputs, one per placeholder in graph order.

    fake_mode: a FakeTensorMode with a ShapeEnv (created when None).
    device: None keeps the saved devices; a string/torch.device puts every
    tensor there (a rank loading an artifact saved on another device); a
    callable maps the saved device string to the one to use.
    Raises MagiError MAGI_ERR_MISSING_META naming every placeholder without
    metadata, MAGI_ERR_UNSUPPORTED for placeholders that cannot be faked
    (opaque, non-strided layouts)."""
    torch = require_torch("magi_aot.fake_inputs()")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    if fake_mode is None:
        fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    env = fake_mode.shape_env
    phs = region.placeholders
    missing = ["'%s' (target %s, placeholder %d, node %d)" % (p["name"], p["target"], p["index"],
                                                               p["node"])
               for p in phs if p["example_value"] is None]
    if missing:
        raise MagiError(-8, "placeholders lack meta.example_value: " + ", ".join(missing))
    symbols = region.symbols
    if env is None:
        if symbols:
            raise MagiError(-1, "fake_mode has no ShapeEnv, but the region has symbols %s"
                            % sorted(symbols))
        symmap = {}
    else:
        symmap = _make_symbols(torch, env, symbols)
    region.symbol_map = symmap
    alg = _SymAlgebra(torch, symmap)
    # An unbacked symbol that sizes a placeholder tensor is a size: >= 0.
    unbacked = {n for n, h in symbols.items() if h is None or _UNBACKED.match(n)}
    sized = set()
    for p in phs:
        ex = p["example_value"]
        if ex.get("kind") == "tensor":
            for d in ex["shape"]:
                if isinstance(d, str):
                    sized.update(s for s in _expr.symbols(_expr.parse(d)) if s in unbacked)
    for name in sorted(sized):
        torch._check(symmap[name] >= 0)

    def ev(d):
        if isinstance(d, int):
            return d
        return alg.build(_expr.parse(d))

    def dev_of(s):
        if device is None:
            return torch.device(s)
        if callable(device):
            return torch.device(device(s))
        return torch.device(device)

    def build(p, ex):
        k = ex["kind"]
        if k == "tensor":
            if ex.get("layout", "strided") != "strided":
                raise MagiError(-13, "placeholder '%s': layout %s cannot be faked"
                                % (p["name"], ex["layout"]))
            dtype = getattr(torch, ex["dtype"], None)
            if not isinstance(dtype, torch.dtype):
                raise MagiError(-4, "placeholder '%s': unknown dtype '%s'" % (p["name"], ex["dtype"]))
            shape = [ev(d) for d in ex["shape"]]
            dev = dev_of(ex["device"])
            if dev.type == "cuda" and not torch.cuda.is_available():
                # torch aborts the process on a fake CUDA tensor without CUDA support
                raise MagiError(-13, "placeholder '%s': recorded on %s, and this torch has no CUDA device: "
                                "pass device=\"cpu\" (fake_inputs / run_fake) to fake it there"
                                % (p["name"], ex["device"]))
            with fake_mode:
                if ex.get("stride") is None:
                    t = torch.empty(shape, dtype=dtype, device=dev)
                else:
                    stride = [ev(d) for d in ex["stride"]]
                    off = ev(ex.get("storage_offset", 0))
                    if isinstance(off, int) and off == 0:
                        t = torch.empty_strided(shape, stride, dtype=dtype, device=dev)
                    else:
                        # storage big enough for offset + the furthest element
                        extent = 1
                        for sz, st in zip(shape, stride):
                            extent = extent + (sz - 1) * st
                        base = torch.empty((off + extent,), dtype=dtype, device=dev)
                        t = base.as_strided(shape, stride, off)
                if ex.get("requires_grad"):
                    t.requires_grad_(True)
            return t
        if k in ("symint", "symbool", "symfloat"):
            e = ex["expr"]
            if isinstance(e, bool):
                return e
            if isinstance(e, int):
                return e
            v = alg.build(_expr.parse(e))
            if k == "symfloat" and not isinstance(v, (float, torch.SymFloat)):
                v = torch.sym_float(v)
            return v
        if k in ("int", "float", "bool"):
            return _value(ex["value"])
        if k == "none":
            return None
        if k in ("tuple", "list"):
            items = [build(p, x) for x in ex["items"]]
            return tuple(items) if k == "tuple" else items
        raise MagiError(-13, "placeholder '%s': example kind '%s' cannot be faked" % (p["name"], k))

    return [build(p, p["example_value"]) for p in phs]
