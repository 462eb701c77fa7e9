#!/usr/bin/env python3
"""Record what Dynamo hands a torch.compile backend for torchtitan's SimpleFSDP.

    python3 python/tests/titan_capture.py all --out DIR [--variant NAME ...] [--notes DIR]
    python3 python/tests/titan_capture.py launch --out DIR --world 2 --vocab 1001 --mp bf16 --attn sdpa
    python3 python/tests/titan_capture.py rank ...   (one rank; what launch starts)

Every rank (a process of a gloo group over a FileStore, CPU) builds
titan_model.build(world, rank, vocab, mp, attn), runs it eagerly, then
compiles it with torch.compile(backend=Recorder(...)) and runs one forward.
The Recorder hands each region to the project's save backend
(magi_aot.save_backend, strict) and, whatever the save backend does, keeps
the region: its magi-fx JSON document as saved (read back from the cache,
or graph_to_doc's document when saving failed, with the error), and a text
dump of the raw torch.fx graph with each placeholder's example value
(DTensor spec: mesh, process group names, placements, global shape and
stride, local shard) and every node whose target or arguments are not plain
(redistribute/to_local, higher-order ops, get_attr submodules), followed by
the region as AOTAutograd traces it (the collectives redistribute runs).

Per variant, DIR/VARIANT/ holds for every rank r:
  rank<r>.json              {"ok", "regions": [{model_idx, key, error, nodes, ...}],
                             "eager_vs_reference", "compiled_vs_eager", "local_shapes"}
  rank<r>.region<i>.json    the region's magi-fx JSON document
  rank<r>.region<i>.fx.txt  the raw graph dump
`all` runs the variants below and, with --notes, copies rank 0's dumps to
NOTES/titan_graph_<variant>.txt (and the last rank's to
titan_graph_<variant>.rank<N-1>.txt where its shards differ); with --fixtures, rank 0's documents to
FIXTURES/<variant>.json (FIXTURES/<variant>.region<i>.json when Dynamo
split the model into several regions).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

# name: (world, vocab, mp, attn)
VARIANTS = {
    "fp32_v1000_w2": (2, 1000, "fp32", "sdpa"),
    "bf16_v1001_w2": (2, 1001, "bf16", "sdpa"),
    "fp32_v1000_w4": (4, 1000, "fp32", "sdpa"),
    "bf16_v1001_w4": (4, 1001, "bf16", "sdpa"),
    "fp32_v1000_w2_flex": (2, 1000, "fp32", "flex"),
}


# ------------------------------------------------------------------ the dump
def _r(x, limit=400):
    s = repr(x)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


def describe_mesh(mesh):
    """What a DeviceMesh carries, with the expressions that read it."""
    import torch.distributed as dist
    out = ["mesh=%r" % (mesh,)]
    for text, get in (("mesh.device_type", lambda: mesh.device_type),
                      ("mesh.mesh.tolist()", lambda: mesh.mesh.tolist()),
                      ("mesh.mesh_dim_names", lambda: mesh.mesh_dim_names),
                      ("mesh.ndim", lambda: mesh.ndim),
                      ("mesh.size()", lambda: mesh.size()),
                      ("mesh.get_coordinate()", lambda: mesh.get_coordinate()),
                      ("mesh._dim_group_names", lambda: getattr(mesh, "_dim_group_names", None))):
        try:
            out.append("  %s=%r" % (text, get()))
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            out.append("  %s failed: %s: %s" % (text, type(e).__name__, e))
    for d in range(mesh.ndim):
        try:
            g = mesh.get_group(d)
            out.append("  mesh.get_group(%d).group_name=%r  dist.get_world_size(g)=%d  "
                       "dist.get_process_group_ranks(g)=%r  backend=%r"
                       % (d, g.group_name, dist.get_world_size(g),
                          dist.get_process_group_ranks(g), dist.get_backend(g)))
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            out.append("  mesh.get_group(%d) failed: %s" % (d, e))
    return out


def describe_value(v, indent="    "):
    """Lines describing an example value (DTensor in full)."""
    import torch
    from torch.distributed.tensor import DTensor
    lines = []
    if isinstance(v, DTensor):
        spec = v._spec
        loc = v._local_tensor
        lines.append("DTensor type=%s.%s fake=%s" % (type(v).__module__, type(v).__qualname__,
                                                    type(loc).__name__))
        lines.append("v.shape=%r v.stride()=%r v.dtype=%r v.device=%r v.requires_grad=%r "
                     "isinstance(v, nn.Parameter)=%r"
                     % (tuple(v.shape), tuple(v.stride()), v.dtype, v.device, v.requires_grad,
                        isinstance(v, torch.nn.Parameter)))
        lines.append("v._spec.placements=%r" % (spec.placements,))
        lines.append("v._spec.tensor_meta=%r" % (spec.tensor_meta,))
        lines.append("v._spec.shard_order=%r" % (getattr(spec, "shard_order", None),))
        lines.append("v._local_tensor: shape=%r stride=%r dtype=%r storage_offset=%r "
                     "requires_grad=%r"
                     % (tuple(loc.shape), tuple(loc.stride()), loc.dtype, loc.storage_offset(),
                        loc.requires_grad))
        lines.extend(describe_mesh(spec.mesh))
    elif isinstance(v, torch.Tensor):
        lines.append("%s shape=%r stride=%r dtype=%r device=%r requires_grad=%r param=%r"
                     % (type(v).__name__, tuple(v.shape), tuple(v.stride()), v.dtype, v.device,
                        v.requires_grad, isinstance(v, torch.nn.Parameter)))
    elif isinstance(v, (list, tuple)):
        lines.append("%s of %d:" % (type(v).__name__, len(v)))
        for i, x in enumerate(v):
            sub = describe_value(x, indent)
            lines.append("[%d] %s" % (i, sub[0].strip() if sub else ""))
            lines.extend(sub[1:])
    elif hasattr(v, "script_class_name"):  # FakeScriptObject: an opaque object input
        real = getattr(v, "real_obj", None)
        lines.append("%s script_class_name=%r wrapped_obj=%s real_obj=%s" % (
            type(v).__name__, v.script_class_name, _r(getattr(v, "wrapped_obj", None)),
            _r(real)))
        from torch.distributed.device_mesh import DeviceMesh
        for obj in (getattr(v, "wrapped_obj", None), real):
            if isinstance(obj, DeviceMesh):
                lines.extend(describe_mesh(obj))
                break
    else:
        lines.append("%s %s" % (type(v).__name__, _r(v)))
    return [indent + s for s in lines]


def _plain_arg(a):
    import torch
    if isinstance(a, (torch.fx.Node, int, float, bool, str, type(None), torch.dtype,
                      torch.device)):
        return True
    if isinstance(a, (list, tuple)):
        return all(_plain_arg(x) for x in a)
    if isinstance(a, dict):
        return all(_plain_arg(x) for x in a.values())
    return False


def _source(node):
    ga = node.meta.get("grapharg")
    src = getattr(ga, "source", None)
    try:
        name = getattr(src, "name", None)
        return name() if callable(name) else (str(name) if name is not None else str(src))
    except Exception:  # noqa: BLE001
        return str(src)


def _target_text(t):
    mod = getattr(t, "__module__", None)
    qual = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    return "%s (%s.%s, type %s)" % (_r(t, 200), mod, qual, type(t).__name__)


def _fields(p):
    """The attributes that define a placement (dataclass fields)."""
    import dataclasses
    if dataclasses.is_dataclass(p):
        return {f.name: getattr(p, f.name, None) for f in dataclasses.fields(p)}
    return {k: getattr(p, k) for k in ("dim", "reduce_op", "split_factor") if hasattr(p, k)}


def _closure(fn):
    cells = getattr(fn, "__closure__", None) or ()
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    return {n: c.cell_contents for n, c in zip(names, cells)}


def dump_graph(gm, example_inputs):
    """The raw graph as text (see the module docstring)."""
    import torch
    out = ["# gm.print_readable()", gm.print_readable(print_output=False), "",
           "# placeholders (node.meta['example_value'], Dynamo's grapharg source)"]
    for n, x in zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs):
        ev = n.meta.get("example_value")
        from magi_aot.fx.walk import input_kind
        out.append("%s  source=%s  input_kind=%s  static_input_type=%r" % (
            n.name, _source(n), input_kind(n),
            (n.meta.get("tensor_dict") or {}).get("_dynamo_static_input_type")))
        out.append("  example_value:")
        out.extend(describe_value(ev, "    "))
        if type(x) is not type(ev):
            out.append("  example_inputs[i] (what the backend is called with): ")
            out.extend(describe_value(x, "    "))
    out += ["", "# nodes with non-plain targets or arguments (call_method, call_function "
            "of a non-OpOverload, higher-order ops, get_attr)"]
    for n in gm.graph.nodes:
        if n.op == "placeholder" or n.op == "output":
            continue
        t = n.target
        qual = getattr(t, "__qualname__", "") or ""
        interesting = (n.op in ("call_method", "get_attr", "call_module")
                       or isinstance(t, torch._ops.HigherOrderOperator)
                       or "<locals>" in qual
                       or not _plain_arg(n.args) or not _plain_arg(n.kwargs))
        if not interesting:
            continue
        out.append("%s: op=%s target=%s" % (n.name, n.op, _target_text(t)
                                             if n.op == "call_function" else _r(t)))
        for i, a in enumerate(n.args):
            out.append("  args[%d]=%s  (type %s)" % (i, _r(a), type(a).__name__))
        for k, a in n.kwargs.items():
            out.append("  kwargs[%r]=%s  (type %s)" % (k, _r(a), type(a).__name__))
            if isinstance(a, (list, tuple)):
                for j, p in enumerate(a):
                    if not isinstance(p, torch.fx.Node):
                        out.append("    [%d] %s.%s %r fields=%r" % (
                            j, type(p).__module__, type(p).__qualname__, p, _fields(p)))
        if n.op == "call_function" and callable(t) and _closure(t):
            out.append("  closure of the target: %s" % _r(_closure(t), 800))
        if n.op == "get_attr":
            obj = gm
            for part in str(t).split("."):
                obj = getattr(obj, part)
            out.append("  attribute type %s.%s" % (type(obj).__module__, type(obj).__qualname__))
            if isinstance(obj, torch.fx.GraphModule):
                out.append("  submodule code:")
                out.extend("    " + line for line in obj.code.strip().splitlines())
            elif isinstance(obj, torch.Tensor):
                out.extend(describe_value(obj, "    "))
        ev = n.meta.get("example_value")
        if ev is not None:
            out.append("  example_value:")
            out.extend(describe_value(ev, "    "))
        st = n.meta.get("stack_trace")
        if st:
            last = [ln.strip() for ln in st.strip().splitlines() if ln.strip()][-2:]
            out.append("  from: %s" % " | ".join(last))
    return "\n".join(out) + "\n"


def aten_dump(gm, example_inputs):
    """The same region traced by AOTAutograd (inference: the forward runs
    under no_grad): DTensor inputs flattened to their local shards and each
    redistribute lowered to the functional collectives it runs."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified
    got = []

    def fw(g, ins):
        got.append(g)  # described after the trace: no fake mode is active then
        return make_boxed_func(g.forward)
    aot_module_simplified(gm, list(example_inputs), fw_compiler=fw)
    if not got:
        return "AOTAutograd produced no forward graph\n"
    g = got[0]
    out = ["# AOTAutograd forward graph (aot_module_simplified, fw_compiler)",
           g.print_readable(print_output=False), "", "# its placeholders (node.meta['val'])"]
    for n in g.graph.nodes:
        if n.op == "placeholder":
            out.append("%s:" % n.name)
            out.extend(describe_value(n.meta.get("val"), "    "))
    return "\n".join(out) + "\n"


def opaque_values(doc):
    """[(node, path, value)] for every {"opaque": ...} argument and
    {"kind": "opaque"} example value of a magi-fx document."""
    found = []

    def walk(x, node, path):
        if isinstance(x, dict):
            if set(x) == {"opaque"} or x.get("kind") == "opaque":
                found.append((node, path, x))
                return
            for k, v in x.items():
                walk(v, node, path + "." + str(k))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, node, "%s[%d]" % (path, i))
    for n in doc["graph"]["nodes"]:
        for key in ("args", "kwargs", "meta"):
            if key in n:
                walk(n[key], n["name"], key)
    return found


# ------------------------------------------------------------------ one rank
class Recorder:
    """A backend: the project's save backend (strict) for each region, and
    the region kept whatever that does. Returns gm.forward (eager)."""

    def __init__(self, cache_dir, model_tag):
        import magi_aot
        self.save = magi_aot.save_backend(cache_dir, model_tag, strict=True)
        self.cache_dir = cache_dir
        self.model_tag = model_tag
        self.regions = []

    def __call__(self, gm, example_inputs):
        from magi_aot.fx import graph_to_doc
        from magi_aot.cache import cache_get_bytes
        from magi_aot.region import load_bytes
        idx = len(self.regions)
        rec = {"model_idx": idx, "fx": None, "doc": None, "error": None, "key": None,
               "nodes": len(gm.graph.nodes), "load_error": None}
        try:
            rec["fx"] = dump_graph(gm, example_inputs)
        except Exception:  # noqa: BLE001 - the dump must not lose the rest
            rec["fx"] = "dump failed:\n" + traceback.format_exc()
        try:
            rec["fx"] += "\n\n" + aten_dump(gm, example_inputs)
        except Exception:  # noqa: BLE001
            rec["fx"] += "\n\nAOTAutograd trace failed:\n" + traceback.format_exc()
        try:
            self.save(gm, example_inputs)
            ent = self.save.entries[-1]
            rec["key"], rec["fingerprint"], rec["bytes"] = ent.key, ent.fingerprint, ent.bytes
            data = cache_get_bytes(self.cache_dir, ent.key)
            try:
                rec["doc"] = load_bytes(data).doc
                rec["doc_source"] = "cache (magi_aot.load_bytes(...).doc)"
            except Exception as e:  # noqa: BLE001
                rec["load_error"] = "%s: %s" % (type(e).__name__, e)
        except Exception as e:  # noqa: BLE001
            rec["error"] = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
        if rec["doc"] is None:
            try:
                rec["doc"] = graph_to_doc(gm, model_tag=self.model_tag, model_idx=idx)
                rec["doc_source"] = "graph_to_doc (not from the cache)"
            except Exception as e:  # noqa: BLE001
                rec["doc_error"] = "%s: %s" % (type(e).__name__, e)
        self.regions.append(rec)
        return gm.forward


def _max_abs(a, b):
    return float((a.float() - b.float()).abs().max())


def rank_main(a):
    import torch
    import torch.distributed as dist
    import titan_model as tm
    torch.set_num_threads(1)
    res = {"rank": a.rank, "world": a.world, "vocab": a.vocab, "mp": a.mp, "attn": a.attn,
           "torch": torch.__version__, "ok": False}
    out = os.path.join(a.out, "rank%d.json" % a.rank)
    try:
        tm.init_gloo(a.rank, a.world, a.store)
        res["torchtitan"] = tm.titan_version()
        model, args = tm.build(a.world, a.rank, a.vocab, a.mp, a.attn)
        res["local_shapes"] = {k: list(v) for k, v in tm.local_shapes(model).items()}
        with torch.no_grad():
            eager = model(*args)
            ref_model, ref_args = tm.build_reference(a.vocab, a.mp, a.attn)
            ref = ref_model(*ref_args)
            res["eager_vs_reference_max_abs"] = _max_abs(eager, ref)
            rec = Recorder(os.path.join(a.out, "cache"), "titan_llama3_" + a.variant)
            compiled = torch.compile(model, backend=rec)
            got = compiled(*args)
            res["compiled_vs_eager_max_abs"] = _max_abs(got, eager)
            res["out_shape"] = list(got.shape)
            res["out_dtype"] = str(got.dtype)
        res["regions"] = []
        for r in rec.regions:
            i = r["model_idx"]
            with open(os.path.join(a.out, "rank%d.region%d.fx.txt" % (a.rank, i)), "w") as f:
                f.write(r["fx"])
            if r["doc"] is not None:
                with open(os.path.join(a.out, "rank%d.region%d.json" % (a.rank, i)), "w") as f:
                    json.dump(r["doc"], f, indent=1, sort_keys=False)
                    f.write("\n")
            summary = {k: v for k, v in r.items() if k not in ("fx", "doc")}
            if r["doc"] is not None:
                summary["opaque"] = [list(x) for x in opaque_values(r["doc"])]
            res["regions"].append(summary)
        res["ok"] = all(r["error"] is None for r in rec.regions) and bool(rec.regions)
        dist.barrier()
    except Exception as e:  # noqa: BLE001 - reported in the rank's file
        res["error"] = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
    return 0 if res["ok"] else 1


# ------------------------------------------------------------------ launcher
def launch(out, variant, world, vocab, mp, attn, timeout=500):
    """Start `world` rank processes; {rank: rank<r>.json contents}."""
    os.makedirs(out, exist_ok=True)
    store = os.path.join(tempfile.mkdtemp(prefix="titan_store_"), "store")
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), HERE,
                                           os.environ.get("PYTHONPATH", "")]))
    procs = []
    for r in range(world):
        cmd = [sys.executable, os.path.abspath(__file__), "rank", "--rank", str(r),
               "--world", str(world), "--vocab", str(vocab), "--mp", mp, "--attn", attn,
               "--variant", variant, "--out", out, "--store", store]
        log = open(os.path.join(out, "rank%d.log" % r), "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
    deadline = time.monotonic() + timeout
    for p, log in procs:
        try:
            p.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
    shutil.rmtree(os.path.dirname(store), ignore_errors=True)
    res = {}
    for r in range(world):
        path = os.path.join(out, "rank%d.json" % r)
        if os.path.exists(path):
            with open(path) as f:
                res[r] = json.load(f)
        else:
            with open(os.path.join(out, "rank%d.log" % r)) as f:
                res[r] = {"ok": False, "error": "no result; log tail:\n" + f.read()[-3000:]}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=["all", "launch", "rank"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--variant", action="append")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--mp", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "flex"])
    ap.add_argument("--rank", type=int)
    ap.add_argument("--store")
    ap.add_argument("--notes", help="copy rank 0's graph dumps to NOTES/titan_graph_<variant>.txt")
    ap.add_argument("--fixtures", help="copy rank 0's documents to FIXTURES/<variant>.json")
    ap.add_argument("--timeout", type=int, default=500)
    a = ap.parse_args()
    if a.cmd == "rank":
        a.variant = (a.variant or ["custom"])[0]
        return rank_main(a)
    if a.cmd == "launch":
        name = (a.variant or ["custom"])[0]
        runs = {name: (a.world, a.vocab, a.mp, a.attn)}
    else:
        names = a.variant or list(VARIANTS)
        runs = {n: VARIANTS[n] for n in names}
    bad = 0
    for name, (world, vocab, mp, attn) in runs.items():
        t = time.monotonic()
        d = os.path.join(a.out, name)
        res = launch(d, name, world, vocab, mp, attn, a.timeout)
        for r in sorted(res):
            v = res[r]
            regs = v.get("regions") or []
            print("%s rank %d: ok=%s regions=%d eager_vs_ref=%s compiled_vs_eager=%s%s"
                  % (name, r, v.get("ok"), len(regs), v.get("eager_vs_reference_max_abs"),
                     v.get("compiled_vs_eager_max_abs"),
                     "" if v.get("ok") else "\n  " + (v.get("error") or
                                                      "; ".join(str(x.get("error"))[:2000]
                                                                for x in regs))))
            bad += not v.get("ok")
        print("%s: %.1fs" % (name, time.monotonic() - t))
        regs0 = (res.get(0) or {}).get("regions") or []
        last = world - 1
        uneven = (res.get(last) or {}).get("local_shapes") != (res.get(0) or {}).get("local_shapes")
        for reg in regs0:
            i = reg["model_idx"]
            suffix = "" if len(regs0) == 1 else ".region%d" % i
            # rank 0, and the last rank where its shards differ (uneven Shard(0))
            for r, tail in [(0, "")] + ([(last, ".rank%d" % last)] if uneven else []):
                src = os.path.join(d, "rank%d.region%d.fx.txt" % (r, i))
                if a.notes and os.path.exists(src):
                    os.makedirs(a.notes, exist_ok=True)
                    shutil.copyfile(src, os.path.join(a.notes, "titan_graph_%s%s%s.txt"
                                                      % (name, suffix, tail)))
            src = os.path.join(d, "rank0.region%d.json" % i)
            if a.fixtures and os.path.exists(src):
                os.makedirs(a.fixtures, exist_ok=True)
                shutil.copyfile(src, os.path.join(a.fixtures, "%s%s.json" % (name, suffix)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
