#!/usr/bin/env python3
"""torchtitan's SimpleFSDP end to end: saved by the save backend, loaded in
fresh rank processes with the copy-engine transport, run from the artifact.

    python3 python/tests/titan_e2e.py --out DIR --world 2 --vocab 1001 --mp bf16 [--keep-cast-pad]
        [--device cpu|cuda] [--runs bind,keep] [--inductor]

1. save: `world` gloo rank processes build torchtitan's Llama3 at a tiny size
   wrapped by torchtitan's own data_parallel(..., "fully_shard", ...)
   (titan_model.py, torchtitan 0.3.0 or 0.2.2), compile it with
   magi_aot.save_backend and run one forward: the region lands in
   DIR/cache, each rank keeps the compiled model's output
   (DIR/rank<r>.compiled.pt).
2. run (once per entry of --runs): `world` fresh rank processes load the
   region from the cache with transport="copy_engine", put it in a
   SymmRuntime (host backend on the CPU, cuda backend with --device cuda;
   the loader lowers every redistribute for the rank), bind the rank's own
   shards, run the rebuilt graph and compare: bit-exact with the compiled
   original; in fp32 on the CPU also bit-exact with the unsharded model
   (on CUDA that difference is reported, not required: the unsharded
   model's kernels may differ). Run "bind" casts and pads static weights
   at bind (every gather leaves c10d); "keep" (--keep-cast-pad alone) keeps
   the cast and pad in the graph and those gathers on c10d with their
   reasons. With --inductor the "bind" run also compiles the rebuilt graph
   module with Inductor (compile_fx from the runtime's fake inputs; rank 0
   first, the others then hit the FX graph cache in DIR/inductor) and
   compares it with the compiled original within INDUCTOR_TOL.

--device cuda: every rank uses the same CUDA device (cuda:rank % count), so
any number of ranks shares one GPU; c10d stays gloo (NCCL refuses two ranks
on one device). During the save, the funcol all-gather the DTensor
redistributes run eagerly is staged through the host on CUDA tensors
(gloo moves host memory only; a copy either way, so the compiled
original's values are the same); in the run, the gathers kept on c10d are
staged by the runtime, the rewritten ones use the cuda backend.

Every rank writes DIR/rank<r>.<phase>.json; the driver prints one line per
rank and a verdict, writes DIR/summary.json and exits non-zero when a
check failed.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

# |inductor - compiled original| <= rel * max|compiled original| + abs, per policy
INDUCTOR_TOL = {"fp32": (1e-3, 1e-5), "bf16": (2e-2, 1e-2)}
RUNS = ("bind", "keep")

_keep = []  # the torch.library registration of the host-staged gather (kept alive)


def _device(args, rank):
    import torch
    if args.device == "cpu":
        return torch.device("cpu")
    n = torch.cuda.device_count()
    if n == 0:
        raise RuntimeError("--device cuda: no CUDA device")
    dev = torch.device("cuda", rank % n)
    torch.cuda.set_device(dev)  # before the DeviceMesh, which would pick one itself
    return dev


def host_staged_gather(input, group_size, group_name):
    """_c10d_functional.all_gather_into_tensor through the host: the input
    copied to the host, gathered there, the result copied back to the
    input's device. Complete when it returns (the caller's wait_tensor
    finds no pending work)."""
    import torch
    f = torch.ops._c10d_functional
    out = f.wait_tensor(f.all_gather_into_tensor(input.cpu(), group_size, group_name))
    return out.to(input.device)


def stage_gathers_on_host():
    """host_staged_gather as the CUDA kernel of
    _c10d_functional.all_gather_into_tensor (gloo's all-gather, which the
    functional op uses, reads host memory only). The CPU kernel is
    untouched, so the staged gather's own call runs it."""
    import torch
    lib = torch.library.Library("_c10d_functional", "IMPL")
    lib.impl("all_gather_into_tensor", host_staged_gather, "CUDA")
    _keep.append(lib)


def _save(args, rank):
    import torch
    import titan_model as tm
    import magi_aot
    dev = _device(args, rank)
    if dev.type == "cuda":
        stage_gathers_on_host()
    tm.init_gloo(rank, args.world, os.path.join(args.out, "store.save"), timeout_s=args.timeout)
    model, inputs = _build(args, rank, dev)
    if args.layout.startswith("moe"):
        torch._dynamo.config.capture_scalar_outputs = True  # graph_trainer's setting (the routing's counts)
    # strict: every placeholder described; the expert path's DeviceMesh
    # inputs are not (the lowering drops them, nothing reads them after it)
    be = magi_aot.save_backend(os.path.join(args.out, "cache"), "titan", strict=not args.layout.startswith("moe"))
    compiled = torch.compile(model, backend=be, fullgraph=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = compiled(*inputs)
    t_compile = time.perf_counter() - t0
    torch.save(out, os.path.join(args.out, "rank%d.compiled.pt" % rank))
    keys = [e.key for e in be.entries]
    return {"ok": bool(keys), "keys": keys, "torch": torch.__version__,
            "torchtitan": tm.titan_version(), "device": str(dev), "trace_save_run_s": t_compile,
            "out_shape": list(out.shape), "out_dtype": str(out.dtype)}


def _build(args, rank, dev):
    """(model, args) of --layout on this rank."""
    import titan_model as tm
    if args.layout == "hsdp":
        return tm.build_hsdp(args.world, rank, vocab=args.vocab, mp=args.mp, attn=args.attn, device=dev)
    if args.layout.startswith("moe"):
        return tm.build_moe(args.world, rank, ep=2, num_experts=_experts(args), mp=args.mp, device=dev)
    return tm.build(args.world, rank, vocab=args.vocab, mp=args.mp, attn=args.attn, device=dev)


def _experts(args):
    """moe: 4 experts (Shard(0) on efsdp); moe_col: 2, fewer than efsdp x
    ep, which torchtitan shards on their dimension 1."""
    return 2 if args.layout == "moe_col" else 4


def _reference(args, dev):
    import titan_model as tm
    if args.layout.startswith("moe"):
        return tm.build_moe_reference(_experts(args), device=dev)
    return tm.build_reference(args.vocab, mp="fp32", attn=args.attn, device=dev)


def _inductor(args, rt, region, inputs, want, rank):
    """compile_fx of the runtime's graph module from its fake inputs (rank
    0 first; the others then hit the FX graph cache), run, compare."""
    import torch
    import torch.distributed as dist
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from magi_aot.compile.launch_order import compile_and_read
    t0 = time.perf_counter()
    compiled = overlap = None
    for turn in (0, 1):
        if (rank == 0) == (turn == 0):
            fakes = rt.fake_inputs(region, FakeTensorMode(shape_env=ShapeEnv()))
            compiled, overlap, _ = compile_and_read(lambda: compile_fx(rt.graph_module(region), fakes))
        dist.barrier()
    res = {"inductor_compile_s": time.perf_counter() - t0}
    sched = rt.schedule_report
    res["schedule_mode"] = sched["mode"]
    res["schedule_moved"] = sum(len(r["moved"]) for r in sched["regions"])
    res["schedule_within_bound"] = all(
        max([g["inflight_bytes"] for g in r["gathers"]] or [0]) <= (r["max_inflight_bytes"] or 0)
        for r in sched["regions"])
    if overlap is not None:
        res["inductor_overlap"] = [o["kernels"] for o in overlap]
    # the graph as loaded, unscheduled, through the same compile
    plain = compile_fx(rt.graph_module(region, scheduled=False),
                       rt.fake_inputs(region, FakeTensorMode(shape_env=ShapeEnv())))
    with torch.no_grad():
        got = compiled(*inputs)
        got_plain = plain(*inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    got_plain = got_plain[0] if isinstance(got_plain, (tuple, list)) else got_plain
    res["inductor_matches_unscheduled"] = bool(torch.equal(got, got_plain))
    rel, abs_ = INDUCTOR_TOL[args.mp]
    tol = rel * float(want.float().abs().max()) + abs_
    diff = float((got.float() - want.float()).abs().max())
    res.update(inductor_max_abs=diff, inductor_tol=tol,
               inductor_ok=bool(got.shape == want.shape and got.dtype == want.dtype and diff <= tol))
    return res


def _run(args, rank, run):
    import torch
    import titan_model as tm
    from magi_aot.cache import cache_get
    from magi_aot.runtime import SymmRuntime
    keep = run == "keep"
    dev = _device(args, rank)
    tm.init_gloo(rank, args.world, os.path.join(args.out, "store.%s" % run), timeout_s=args.timeout)
    # the expert path's all-to-all names its process group as each rank
    # created it (the groups' names differ between ranks): each rank loads
    # its own region there, the region rank 0 saved elsewhere
    own = rank if args.layout.startswith("moe") else 0
    with open(os.path.join(args.out, "rank%d.save.json" % own)) as f:
        key = json.load(f)["keys"][0]
    # the model first: its meshes create the process groups in the order
    # the save did, so the group names the region records (the expert
    # path's all-to-all on "ep") name the same groups here
    model, inputs = _build(args, rank, dev)
    t0 = time.perf_counter()
    # one load, rank-local, for this rank: the runtime binds it as it stands
    region = cache_get(os.path.join(args.out, "cache"), key, transport="copy_engine", rank=rank,
                       world=args.world, keep_cast_pad=keep)
    # the members of every group the region names, from the model's meshes
    from magi_aot.runtime.groups import collective_groups
    used = collective_groups([region.doc])
    groups = {k: v for k, v in tm.mesh_groups(model).items() if k in used}
    rt = SymmRuntime([region], device=dev, keep_cast_pad=keep, groups=groups)
    if not rt.plan.adopted or rt.regions[0] is not region:
        raise AssertionError("the runtime loaded the region a second time")
    t_load = time.perf_counter() - t0
    shards = dict(model.named_parameters())
    shards.update(model.named_buffers())
    t0 = time.perf_counter()
    rt.bind(shards, strict=True)
    rt.ready()
    t_bind = time.perf_counter() - t0
    loaded = rt.regions[0]
    gm = rt.graph_module(region)
    values = {p["name"]: v for p, v in zip([p for p in loaded.placeholders if "tokens" in p["name"]], inputs)}
    args_in = rt.args(region, values)
    with torch.no_grad():
        out = gm(*args_in)
    out = out[0] if isinstance(out, (tuple, list)) else out
    want = torch.load(os.path.join(args.out, "rank%d.compiled.pt" % rank), map_location=dev)
    res = {"run": run, "device": str(dev), "load_s": t_load, "bind_s": t_bind,
           "plan_sha256": rt.plan_sha256,
           "lowered": sum(e["lowered"] for e in loaded.redistributes),
           "redistributes": len(loaded.redistributes),
           "at_bind": sum(bool(e.get("at_bind")) for e in loaded.redistributes),
           "rewritten": sum(g["reason"] == "rewritten" for g in loaded.rewrite_report),
           "gathers": len(loaded.rewrite_report),
           "kept": sorted({g["reason"] for g in loaded.rewrite_report if g["reason"] != "rewritten"}),
           "groups": sorted({e["group"] for e in loaded.redistributes if e["lowered"]}),
           "shard_group_size": max([w["group_size"] for w in rt.plan.windows] or [0]),
           "rewrapped": sum(bool(e.get("rewrapped")) for e in loaded.redistributes),
           "column": sum(e.get("shard_dim") == 1 for e in loaded.redistributes if e["lowered"]),
           "mesh_inputs": [p["name"] for p in loaded.placeholders
                           if (p["example_value"] or {}).get("kind") == "opaque"],
           "bit_exact_compiled": bool(out.shape == want.shape and torch.equal(out, want)),
           "max_abs_compiled": float((out.float() - want.float()).abs().max())}
    if args.mp == "fp32":
        ref, rin = _reference(args, dev)
        with torch.no_grad():
            r = ref(*rin)
        res["bit_exact_unsharded"] = bool(torch.equal(out, r))
        res["max_abs_unsharded"] = float((out - r).abs().max())
    ok = res["bit_exact_compiled"] and res["lowered"] == res["redistributes"]
    if dev.type == "cpu":
        ok = ok and res.get("bit_exact_unsharded", True)
    if keep:
        ok = ok and res["at_bind"] == 0
    else:
        ok = ok and res["rewritten"] == res["gathers"]
    if args.inductor and not keep:
        res.update(_inductor(args, rt, region, args_in, want, rank))
        ok = ok and res["inductor_ok"]
    res["ok"] = ok
    rt.close()
    return res


def _rank_main(args):
    rank = int(os.environ["RANK"])
    phase = args.phase
    try:
        if phase == "save":
            res = _save(args, rank)
        else:
            res = _run(args, rank, phase[len("run_"):])
    except Exception as e:  # noqa: BLE001 - reported by the driver
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}
    with open(os.path.join(args.out, "rank%d.%s.json" % (rank, phase)), "w") as f:
        json.dump(res, f, indent=1)
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
    return 0 if res.get("ok") else 1


def _launch(args, phase):
    procs = []
    for r in range(args.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.world),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(args.out, "inductor"))
        env.pop("LOCAL_RANK", None)  # the device is chosen here, not by the DeviceMesh
        cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--out", args.out,
               "--world", str(args.world), "--vocab", str(args.vocab), "--mp", args.mp,
               "--attn", args.attn, "--device", args.device, "--timeout", str(args.timeout),
               "--layout", args.layout]
        if args.inductor:
            cmd.append("--inductor")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + args.timeout
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=max(1, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            p.kill()
            logs.append(p.communicate()[0] + "\n[killed after %d s]" % args.timeout)
    with open(os.path.join(args.out, "%s.log" % phase), "w") as f:
        for r, log in enumerate(logs):
            f.write("===== rank %d\n%s\n" % (r, log))
    results = []
    for r in range(args.world):
        path = os.path.join(args.out, "rank%d.%s.json" % (r, phase))
        res = json.load(open(path)) if os.path.exists(path) else {"ok": False, "error": "no result",
                                                                    "log": logs[r][-2000:]}
        results.append(res)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--mp", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--attn", choices=["sdpa", "flex"], default="sdpa")
    ap.add_argument("--layout", choices=["fsdp", "hsdp", "moe", "moe_col"], default="fsdp",
                    help="fsdp: fully_shard on a 1-D mesh; hsdp: hybrid_shard on 2 x world/2; moe: the "
                         "tiny Qwen3 MoE, experts parallel over 2 ranks and sharded on efsdp; moe_col: "
                         "the same with 2 experts, sharded on their dimension 1")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--runs", default=None,
                    help="comma-separated runs from one save: bind (cast and pad at bind), "
                         "keep (cast and pad kept on c10d); default bind")
    ap.add_argument("--keep-cast-pad", action="store_true", help="the same as --runs keep")
    ap.add_argument("--inductor", action="store_true",
                    help="the bind run also through Inductor (compile_fx of the rebuilt graph)")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    if args.phase:
        return _rank_main(args)
    runs = args.runs.split(",") if args.runs else (["keep"] if args.keep_cast_pad else ["bind"])
    if args.runs and args.keep_cast_pad or any(r not in RUNS for r in runs) or not runs:
        ap.error("--runs takes a comma-separated list of %s (and not with --keep-cast-pad)"
                 % ", ".join(RUNS))
    os.makedirs(args.out, exist_ok=True)
    summary = {"world": args.world, "vocab": args.vocab, "mp": args.mp, "attn": args.attn, "layout": args.layout,
               "device": args.device, "runs": runs, "inductor": args.inductor, "phases": {},
               "ok": False}

    def finish(code, verdict):
        summary["verdict"] = verdict
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        print(verdict)
        return code

    for phase in ["save"] + ["run_" + r for r in runs]:
        t0 = time.monotonic()
        res = _launch(args, phase)
        summary["phases"][phase] = {"seconds": time.monotonic() - t0, "ranks": res}
        bad = [r for r in res if not r.get("ok")]
        for r, x in enumerate(res):
            brief = {k: v for k, v in x.items() if k not in ("trace", "log", "plan_sha256")}
            print("titan_e2e %s rank %d: %s" % (phase, r, json.dumps(brief)))
        if bad:
            for x in bad:
                print(x.get("trace") or x.get("log") or "")
            return finish(1, "titan_e2e: FAIL in %s" % phase)
        if phase != "save":
            if len({x["plan_sha256"] for x in res}) != 1:
                return finish(1, "titan_e2e: FAIL: the ranks' plans differ (%s)" % phase)
    summary["ok"] = True
    return finish(0, "titan_e2e: PASS (world %d, vocab %d, %s, %s, %s: %s%s)" % (
        args.world, args.vocab, args.mp, args.attn, args.device,
        ", ".join("cast and pad kept" if r == "keep" else "cast and pad at bind" for r in runs),
        ", Inductor" if args.inductor else ""))


if __name__ == "__main__":
    sys.exit(main())
