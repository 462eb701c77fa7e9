"""Torch-side helpers shared by test_torch.py (CPU, small) and
gpu/roundtrip.py (H200, real sizes): the models, a description of a
GraphModule's placeholders taken straight from Dynamo's FakeTensors, and the
comparison of rebuilt fake inputs against that description.

The comparison does not reuse magi_aot's expression code: both sides'
expressions are printed by sympy/torch and evaluated with Python's own
eval() under several random assignments of the symbols (mapped through the
region's saved-name -> new-symbol map), so `1024*s27` on one side must equal
`1024*s96` on the other for every assignment, not just the hint.
"""
import math
import random
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

_SYM = re.compile(r"\b([suf]\d+)\b")

EVAL_NS = {
    "Mod": lambda a, b: a % b, "PythonMod": lambda a, b: a % b,
    "FloorDiv": lambda a, b: a // b, "CleanDiv": lambda a, b: a // b,
    "CeilDiv": lambda a, b: -((-a) // b), "IntTrueDiv": lambda a, b: a / b,
    "FloatTrueDiv": lambda a, b: a / b, "Max": max, "Min": min,
    "FloorToInt": math.floor, "CeilToInt": math.ceil, "TruncToInt": int, "floor": math.floor,
    "ceiling": math.ceil, "Abs": abs, "Identity": lambda x: x,
    "ModularIndexing": lambda x, d, m: (x // d) % m, "True": True, "False": False,
}


def py_eval(text, values):
    return eval(text, {"__builtins__": {}}, dict(EVAL_NS, **values))  # noqa: S307


# ------------------------------------------------------------------ models
class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


class Block(nn.Module):
    def __init__(self, d=1024, heads=8, ffn=4096):
        super().__init__()
        self.h = heads
        self.n1 = RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.n2 = RMSNorm(d)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        q, k, v = [t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v)]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Stack(nn.Module):
    def __init__(self, n=24, d=512, heads=8, ffn=1024):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, ffn) for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Unbacked(nn.Module):
    """Data-dependent sizes: split sizes read from a tensor (u0..u3)."""

    def forward(self, x, splits):
        sizes = splits.tolist()
        for s in sizes:
            torch._check(s >= 0)
        total = sizes[0] + sizes[1] + sizes[2] + sizes[3]
        y = x.new_zeros(total, x.shape[1])
        nz = torch.nonzero(x[:, 0] > 0)
        return y.sum(0) + x.sum(0), nz, y


def fsdp_setup(world=4):
    """A fake process group of `world` ranks (rank 0) and a subgroup {0, 1}."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    sub = dist.new_group([0, 1])
    return dist.group.WORLD, sub


class FSDPBlock(nn.Module):
    """SimpleFSDP-style: DTensor weights sharded on dim 0 over the world,
    gathered with functional collectives at use; a cast before one gather,
    a padded uneven weight, and a coalesced gather of two plain shards on a
    second process group."""

    def __init__(self, world_pg, sub_pg, device, d=1024, ffn=4096, world=4):
        super().__init__()
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.tensor import DTensor, Shard
        self.world_pg, self.sub_pg, self.world, self.d = world_pg, sub_pg, world, d
        mesh = DeviceMesh(device.type, list(range(world)))

        def shard(rows, cols, dtype=torch.bfloat16):
            local = torch.randn(rows // world, cols, dtype=dtype, device=device)
            return nn.Parameter(DTensor.from_local(local, mesh, [Shard(0)], run_check=False),
                                requires_grad=False)
        self.wq = shard(d, d)
        self.w_up_fp32 = shard(ffn, d, torch.float32)
        self.w_down = shard(d, ffn)
        self.w_odd = nn.Parameter(torch.randn(255, d, dtype=torch.bfloat16, device=device),
                                  requires_grad=False)
        self.expert_a = nn.Parameter(torch.randn(d, d, dtype=torch.bfloat16, device=device),
                                     requires_grad=False)
        self.expert_b = nn.Parameter(torch.randn(d, d, dtype=torch.bfloat16, device=device),
                                     requires_grad=False)
        self.wo = shard(d, d)

    def forward(self, x):
        # Under Dynamo the functional collectives insert their own
        # wait_tensor after each gather (one wait per gather, as Dynamo
        # records SimpleFSDP); eagerly they return AsyncCollectiveTensors.
        import torch.distributed._functional_collectives as fc
        g = self.world_pg
        h = F.linear(x, fc.all_gather_tensor(self.wq.to_local(), 0, g))
        up = fc.all_gather_tensor(self.w_up_fp32.to_local().to(torch.bfloat16), 0, g)
        down = fc.all_gather_tensor(self.w_down.to_local(), 0, g)
        h = F.linear(F.silu(F.linear(h, up)), down)
        odd = fc.all_gather_tensor(F.pad(self.w_odd, (0, 0, 0, 1)), 0, g)
        h = h + F.linear(h, odd[:4 * 255]).sum(-1, keepdim=True)
        ea, eb = fc.all_gather_into_tensor_coalesced([self.expert_a, self.expert_b], self.sub_pg)
        h = h + F.linear(F.linear(h, ea.view(-1, self.d)[:self.d]),
                         eb.view(-1, self.d)[:self.d].t())
        return F.linear(h, fc.all_gather_tensor(self.wo.to_local(), 0, g))


# Weights whose gathers qualify for the copy engine (to_local(X) or X of a
# placeholder, even shard), and the reason the others stay on NCCL.
FSDP_ELIGIBLE = {"wq", "w_down", "wo", "expert_a", "expert_b"}
FSDP_KEPT = {"w_up_fp32": "cast", "w_odd": "pad"}


# ------------------------------------------------------- trace and describe
class Capture:
    """A backend that keeps every GraphModule Dynamo hands over and then
    delegates to `inner` (e.g. a magi_aot SaveBackend)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.gms = []

    def __call__(self, gm, example_inputs):
        self.gms.append(gm)
        if self.inner is not None:
            return self.inner(gm, example_inputs)
        return gm.forward


def _hint_of(s):
    try:
        from _torch_compat import has_hint, hint_int
        return int(hint_int(s)) if has_hint(s) else None
    except ImportError:
        h = getattr(s.node, "hint", None)
        return int(h) if h is not None else None
    except Exception:
        return None


def _offset(v):
    try:
        return _dim_desc(v.storage_offset())
    except Exception:  # wrapper subclasses without a storage
        return {"c": 0}


def _dim_desc(x):
    if isinstance(x, torch.SymInt):
        e = x.node.expr
        if getattr(e, "is_number", False):
            return {"c": int(e)}
        return {"e": str(e), "hint": _hint_of(x)}
    return {"c": int(x)}


def describe_value(v):
    """Metadata of one placeholder value, read from Dynamo's own objects."""
    if isinstance(v, torch.Tensor):
        return {"kind": "tensor", "dtype": str(v.dtype), "device": str(v.device),
                "requires_grad": bool(v.requires_grad),
                "shape": [_dim_desc(x) for x in v.shape],
                "stride": [_dim_desc(x) for x in v.stride()],
                "offset": _offset(v)}
    if isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
        return {"kind": "int", "v": _dim_desc(v)}
    if isinstance(v, torch.SymBool):
        return {"kind": "bool", "v": {"e": str(v.node.expr)}}
    return {"kind": type(v).__name__, "v": repr(v)}


def describe_gm(gm):
    out = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            out.append({"name": n.name, "meta": describe_value(n.meta["example_value"])})
    return out


# --------------------------------------------------------------- compare
def _symbols_of(text):
    return sorted(set(_SYM.findall(text)))


def compare(expected, region, fakes, trials=6, seed=1):
    """Problems (a list of strings; empty = equal) between a described
    placeholder list and the fake inputs rebuilt from `region`."""
    problems = []
    smap = region.symbol_map or {}
    new_name = {}
    for old, si in smap.items():
        new_name[old] = str(si.node.expr) if isinstance(si, torch.SymInt) else None
    rng = random.Random(seed)
    olds = sorted(smap)
    assigns = [{o: rng.randint(2, 4096) for o in olds} for _ in range(trials)]

    def check_dim(where, want, got):
        if "c" in want:
            if isinstance(got, torch.SymInt) and not getattr(got.node.expr, "is_number", False):
                problems.append("%s: want constant %s, got symbolic %s" % (where, want["c"], got))
            elif int(got) != want["c"]:
                problems.append("%s: want %s, got %s" % (where, want["c"], int(got)))
            return
        if not isinstance(got, torch.SymInt):
            problems.append("%s: want symbolic %s, got constant %s" % (where, want["e"], got))
            return
        gtext = str(got.node.expr)
        want_syms = _symbols_of(want["e"])
        mapped = sorted(new_name.get(s) or "?" for s in want_syms)
        if sorted(_symbols_of(gtext)) != mapped:
            problems.append("%s: free symbols %s (saved %s -> %s)" % (where, _symbols_of(gtext),
                                                                     want_syms, mapped))
            return
        if want.get("hint") is not None and _hint_of(got) != want["hint"]:
            problems.append("%s: hint %s != %s" % (where, _hint_of(got), want["hint"]))
        for a in assigns:
            b = {new_name[o]: v for o, v in a.items() if new_name.get(o)}
            try:
                x = py_eval(want["e"], a)
            except ZeroDivisionError:
                continue
            y = py_eval(gtext, b)
            if x != y:
                problems.append("%s: %s vs %s differ at %s: %s != %s" % (where, want["e"], gtext,
                                                                       a, x, y))
                return

    if len(expected) != len(fakes):
        return ["%d placeholders described, %d rebuilt" % (len(expected), len(fakes))]
    for e, f in zip(expected, fakes):
        m, name = e["meta"], e["name"]
        if m["kind"] == "tensor":
            if not isinstance(f, torch.Tensor):
                problems.append("%s: not a tensor: %r" % (name, f))
                continue
            from torch._subclasses.fake_tensor import FakeTensor
            if not isinstance(f, FakeTensor):
                problems.append("%s: %s is not a FakeTensor" % (name, type(f).__name__))
            for key, got in (("dtype", str(f.dtype)), ("device", str(f.device)),
                             ("requires_grad", bool(f.requires_grad))):
                if m[key] != got:
                    problems.append("%s: %s %s != %s" % (name, key, m[key], got))
            if len(m["shape"]) != f.dim():
                problems.append("%s: ndim %d != %d" % (name, len(m["shape"]), f.dim()))
                continue
            for i, (w, g) in enumerate(zip(m["shape"], f.shape)):
                check_dim("%s.shape[%d]" % (name, i), w, g)
            for i, (w, g) in enumerate(zip(m["stride"], f.stride())):
                check_dim("%s.stride[%d]" % (name, i), w, g)
            check_dim("%s.storage_offset" % name, m["offset"], f.storage_offset())
        elif m["kind"] == "int":
            check_dim(name, m["v"], f)
        else:
            if type(f).__name__ != m["kind"]:
                problems.append("%s: kind %s != %s" % (name, m["kind"], type(f).__name__))
    return problems


def gather_sources(region):
    """{gather node name: source weight attribute} walking back through
    to_local / casts / pads to the placeholder (coalesced: a tuple)."""
    nodes = {n["name"]: n for n in region.nodes}

    def src(ref):
        n = nodes[ref["node"]]
        while n["op"] != "placeholder":
            a = n.get("args") or []
            if not a or not isinstance(a[0], dict) or "node" not in a[0]:
                return None
            n = nodes[a[0]["node"]]
        m = re.match(r"L_self_parameters_(.*)_$", n["target"]) or \
            re.match(r"L_self_(.*)_$", n["target"])
        return m.group(1) if m else n["target"]

    out = {}
    for n in region.nodes:
        if "all_gather" in n["target"]:
            a0 = n["args"][0]
            if isinstance(a0, list):
                out[n["name"]] = tuple(src(x) for x in a0)
            else:
                out[n["name"]] = src(a0)
    return out


def check_fsdp_report(region):
    """Problems with the copy-engine rewrite of the FSDP block."""
    problems = []
    srcs = gather_sources(region)
    rep = {g["name"]: g for g in region.rewrite_report or []}
    if not rep:
        return ["no rewrite report"]
    for name, s in srcs.items():
        weights = s if isinstance(s, tuple) else (s,)
        g = rep.get(name)
        if g is None:
            problems.append("gather %s (%s) missing from the report" % (name, weights))
            continue
        if all(w in FSDP_ELIGIBLE for w in weights):
            if g["reason"] != "rewritten" or not g["to"].startswith("torch.ops.magi.symm_all_gather"):
                problems.append("eligible gather %s of %s not rewritten: %s" % (name, weights, g))
        else:
            want = {FSDP_KEPT.get(w) for w in weights} - {None}
            if g["reason"] == "rewritten" or g["reason"] not in want:
                problems.append("gather %s of %s: reason %s, want %s" % (name, weights, g["reason"], want))
    if region.n_rewritten != sum(1 for s in srcs.values()
                                 if all(w in FSDP_ELIGIBLE for w in (s if isinstance(s, tuple) else (s,)))):
        problems.append("n_rewritten %d does not match the eligible gathers" % region.n_rewritten)
    return problems


# ------------------------------------------------- recompile from artifact
def run_rebuilt(region, device=None):
    """Rebuild the GraphModule and the fake inputs from `region` alone, run
    the graph under the FakeTensorMode, and compare every output tensor with
    the saved example value of the node it comes from: dtype, rank, and each
    dim's hint against the C evaluator on the saved expression (unbacked
    dims: no hint on either side). Returns (problems, n_outputs_checked)."""
    from _torch_compat import has_hint, hint_int
    from magi_aot.fx import expr as _expr
    from magi_aot.fx.rebuild import run_fake
    out, _, _ = run_fake(region, device=device)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    onode = next(n for n in region.nodes if n["op"] == "output")
    refs = onode["args"][0]
    refs = refs.get("tuple", refs) if isinstance(refs, dict) else refs
    by_name = {n["name"]: n for n in region.nodes}
    hints = region.symbols
    problems, checked = [], 0
    for ref, o in zip(refs, outs):
        if not (isinstance(ref, dict) and "node" in ref) or not isinstance(o, torch.Tensor):
            continue
        ex = (by_name[ref["node"]].get("meta") or {}).get("example_value") or {}
        if ex.get("kind") != "tensor":
            continue
        checked += 1
        where = "output %s" % ref["node"]
        if str(o.dtype) != "torch." + ex["dtype"] or o.dim() != len(ex["shape"]):
            problems.append("%s: %s%s vs saved %s%s" % (where, o.dtype, list(o.shape),
                                                      ex["dtype"], ex["shape"]))
            continue
        for i, (d, x) in enumerate(zip(ex["shape"], o.shape)):
            unbacked = isinstance(d, str) and any(hints.get(s) is None
                                                  for s in _expr.symbols(_expr.parse(d)))
            if unbacked:
                if not isinstance(x, torch.SymInt) or has_hint(x):
                    problems.append("%s.shape[%d]: saved %s is unbacked, got %s" % (where, i, d, x))
                continue
            want = _expr.eval_int(d, hints)
            if hint_int(x) != want:
                problems.append("%s.shape[%d]: %s -> %s, rebuilt %s (hint %s)"
                                % (where, i, d, want, x, hint_int(x)))
    return problems, checked
