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
RUNS = ("bind", "keep", "overlap", "overlap_measured", "code", "code_again")
RUN_WORDS = {"bind": "cast and pad at bind", "keep": "cast and pad kept", "code": "compiled code stored",
             "code_again": "compiled code served"}   # the verdict's words per run (else its name)

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


class _WaitProbe:
    """CUDA events around every wait of a copy-engine gather in the
    forwards run while it is on: for each call of the runtime's gathers
    (in call order: the weights it gathers), the device time the waiting
    stream spent at its wait_tensor, i.e. the gather's exposed time. Needs
    the Python operator kernels (MAGI_AOT_OPS=python: their Work is the
    one patched here)."""

    def __init__(self, rt):
        import torch
        from magi_aot.runtime import gather as G
        self.torch, self.calls, self.waits, self.on = torch, [], [], False
        self._by_out = {}
        weights = [sl["weight"] for sl in rt.slots]
        gatherer = rt._gatherer
        real_gather = gatherer.gather

        self.args = {}  # weights -> the arguments of its call (copy_times)
        self._real_gather = real_gather

        def gather(slots, inputs, group_size):
            outs = real_gather(slots, inputs, group_size)
            if self.on:
                seq = len(self.calls)
                self.calls.append("+".join(weights[s] for s in slots))
                self.args.setdefault(self.calls[-1], (slots, inputs, group_size))
                for o in outs:
                    self._by_out[id(o)] = seq
            return outs
        gatherer.gather = gather
        cls = G._GatherWork._cls or G._GatherWork._build()
        real_wait = cls.wait

        def wait(work, timeout=None):
            outs = work.outs
            seq = None
            if self.on and outs:
                for ref in outs:
                    o = ref()
                    if o is not None and id(o) in self._by_out:
                        seq = self._by_out[id(o)]
                        break
            if seq is None:
                return real_wait(work, timeout)
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            r = real_wait(work, timeout)
            e1.record()
            self.waits.append((seq, e0, e1))
            return r
        cls.wait = wait

    def copy_times(self, lead_cycles, n=5):
        """{gather: device us of its call alone, launch to the end of its
        wait, the GPU held by a spin kernel while the host queues it, so
        the host's time is not counted} (median of n): its copy time."""
        import statistics
        torch = self.torch
        wait = torch.ops._c10d_functional.wait_tensor
        out = {}
        for name, (slots, inputs, group_size) in self.args.items():
            ts = []
            for _ in range(n):
                torch.cuda.synchronize()
                torch.cuda._sleep(lead_cycles // 10)
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                outs = self._real_gather(slots, inputs, group_size)
                wait(outs[0])
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) * 1e3)
            out[name] = statistics.median(ts)
        return out

    def beside_matmul(self, lead_cycles, copy_us, n=5):
        """{gather: (matmul us, stall us)}: the gather called, then bf16
        4096^3 matrix multiplies queued behind it on the same stream, sized
        to take about 3x the gather's copy time alone, then its wait
        (medians of n): the stall is how long the copy outlasted that
        compute. Zero: the copy ran under it at a third of its speed or
        better; more: it was slowed past that (on one GPU the "peer" copies
        are same-device copies sharing the SMs with the matmuls)."""
        import statistics
        torch = self.torch
        wait = torch.ops._c10d_functional.wait_tensor
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(3):
            torch.mm(a, a)
        e1.record()
        e1.synchronize()
        mm_us = e0.elapsed_time(e1) * 1e3 / 3
        out = {}
        for name, (slots, inputs, group_size) in self.args.items():
            k = max(1, round(3 * copy_us[name] / mm_us))
            mms, stalls = [], []
            for _ in range(n):
                torch.cuda.synchronize()
                torch.cuda._sleep(lead_cycles // 10)
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                ev[0].record()
                outs = self._real_gather(slots, inputs, group_size)
                for _ in range(k):
                    torch.mm(a, a)
                ev[1].record()
                wait(outs[0])
                ev[2].record()
                torch.cuda.synchronize()
                mms.append(ev[0].elapsed_time(ev[1]) * 1e3)
                stalls.append(ev[1].elapsed_time(ev[2]) * 1e3)
            out[name] = (statistics.median(mms), statistics.median(stalls))
        return out

    def forward(self, fn, inputs, lead_cycles):
        """One forward with the GPU held by a spin kernel while the host
        queues it: (device us of the forward, {gather: stall us}, output)."""
        torch = self.torch
        self.calls, self.waits, self._by_out, self.on = [], [], {}, True
        torch.cuda.synchronize()
        torch.cuda._sleep(lead_cycles)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        with torch.no_grad():
            out = fn(*inputs)
        e1.record()
        self.on = False
        torch.cuda.synchronize()
        stalls = {}
        for seq, a, b in self.waits:
            name = self.calls[seq]
            stalls[name] = stalls.get(name, 0.0) + a.elapsed_time(b) * 1e3
        return e0.elapsed_time(e1) * 1e3, stalls, out


def _graph_replays(torch, fns, inputs, lead_cycles, iters, outs, first):
    """Each compiled form captured into a CUDA graph (the gathers' side
    stream and their waits become the graph's edges) and replayed:
    {form: {"graph_forward_us": device us of a replay (median, the GPU
    held while the host queues), "graph_equal": the replay's output equals
    the compiled form's}} or {"graph_error": why} where capture failed."""
    import statistics
    res = {}
    for n, fn in fns.items():
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.no_grad(), torch.cuda.stream(side):
                for _ in range(2):
                    fn(*inputs)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g):
                static = fn(*inputs)
            ts = []
            for _ in range(iters):
                torch.cuda.synchronize()
                torch.cuda._sleep(lead_cycles)
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                g.replay()
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) * 1e3)
            res[n] = {"graph_forward_us": statistics.median(ts),
                      "graph_equal": bool(torch.equal(first(static), first(outs[n])))}
        except Exception as e:  # noqa: BLE001 - reported beside the other forms
            res[n] = {"graph_error": "%s: %s" % (type(e).__name__, e)}
    return res


def _overlap(args, rt, region, inputs, rank):
    """The overlap benchmark (rank 0; the other ranks keep their windows
    mapped and wait): the region compiled by Inductor with its defaults
    from the runtime's graph module, scheduled and unscheduled, then
    --iters forwards of each, alternating: per gather the measured stall
    at its wait (median), the forward's device time (median), the
    predicted stall of the schedule, the kernels Inductor queued between
    each launch and its wait, and whether both give the same output."""
    import statistics
    import torch
    import torch.distributed as dist
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from magi_aot.compile.launch_order import compile_and_read
    res = {}
    if rank == 0:
        probe = _WaitProbe(rt)
        fns, code, sources, order = {}, {}, {}, {}
        for name, scheduled in (("scheduled", True), ("unscheduled", False)):
            t0 = time.perf_counter()
            fakes = rt.fake_inputs(region, FakeTensorMode(shape_env=ShapeEnv()))
            fn, overlap, path = compile_and_read(
                lambda: compile_fx(rt.graph_module(region, scheduled=scheduled), fakes))
            fns[name] = fn
            with open(path) as f:
                sources[name] = f.read()
            code[name] = {"compile_s": time.perf_counter() - t0,
                          "kernels_under": [o["kernels"] for o in overlap] if overlap else None}
        lead = int(args.lead_ms * 1.98e6)  # cycles at about 1.98 GHz
        rows = {n: {"forward_us": [], "stalls": {}} for n in fns}
        outs = {}
        for _ in range(2):  # warm-up: allocator, autotuning caches
            for n, fn in fns.items():
                probe.forward(fn, inputs, lead)
        for _ in range(args.iters):
            for n, fn in fns.items():
                fwd, stalls, out = probe.forward(fn, inputs, lead)
                order[n] = list(probe.calls)
                rows[n]["forward_us"].append(fwd)
                for g, v in stalls.items():
                    rows[n]["stalls"].setdefault(g, []).append(v)
                outs[n] = out
        first = lambda o: o[0] if isinstance(o, (tuple, list)) else o  # noqa: E731
        a, b = first(outs["scheduled"]), first(outs["unscheduled"])
        res["outputs_equal"] = bool(torch.equal(a, b))
        # Inductor may fuse a reordered graph differently on the GPU
        rel, abs_ = INDUCTOR_TOL[args.mp]
        res["outputs_max_abs"] = float((a.float() - b.float()).abs().max())
        res["outputs_within_tol"] = res["outputs_max_abs"] <= rel * float(b.float().abs().max()) + abs_
        res["copy_us"] = probe.copy_times(lead)
        res["beside_matmul_us"] = probe.beside_matmul(lead, res["copy_us"])
        graphs = _graph_replays(torch, fns, inputs, lead, args.iters, outs, first)
        # the compiled order of each, drawn (DIR/overlap_<form>.svg)
        from magi_aot.compile.launch_order import code_timeline_svg
        for n, text in sources.items():
            with open(os.path.join(args.out, "overlap_%s.svg" % n), "w") as f:
                f.write(code_timeline_svg(text, names=[w.replace("L_self_modules_", "") for w in order[n]],
                                          title="%s, %s: compiled order" % (args.size, n)))
        # the schedule's prediction per gather, by the weights it gathers
        # (the launch node's input placeholder, whose target is the slot's)
        nodes = {n["name"]: n for n in rt.regions[0].nodes}

        def weight_of(node):
            a0 = (nodes[node].get("args") or [None])[0]
            ph = nodes.get(a0["node"]) if isinstance(a0, dict) and "node" in a0 else None
            return ph.get("target") if ph else node
        pred = [g for r in rt.schedule_report["regions"] for g in r["gathers"]]
        res["schedule"] = {"mode": rt.schedule_report["mode"],
                           "moved": sum(len(r["moved"]) for r in rt.schedule_report["regions"]),
                           "predicted": [{"node": g["node"], "weight": weight_of(g["node"]),
                                          "stall_us": g["stall_us"], "cost_us": g["cost_us"],
                                          "inflight_bytes": g["inflight_bytes"]} for g in pred]}
        for n in fns:
            st = rows[n]["stalls"]
            res[n] = {"forward_us": statistics.median(rows[n]["forward_us"]),
                      "stall_us": {g: statistics.median(v) for g, v in st.items()},
                      "exposed_us": sum(statistics.median(v) for v in st.values()),
                      **graphs[n], **code[n]}
        res["iters"] = args.iters
        res["ok"] = (res["outputs_within_tol"] and len(res["scheduled"]["stall_us"]) > 0
                     and all(g.get("graph_equal") for g in graphs.values()))
    dist.barrier()
    if rank != 0:
        res["ok"] = True
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
    # (--one-artifact: every rank loads rank 0's region and gives no
    # groups=: the runtime places each group on its mesh dimension)
    own = rank if args.layout.startswith("moe") and not args.one_artifact else 0
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
    schedule = "auto"
    if run == "overlap_measured":
        # a cost table measured on this GPU (rank 0 profiles the region as
        # loaded; every rank's cost keys are the same, so all use it)
        import torch.distributed as dist
        import magi_aot
        from magi_aot.profile import build_table, profile, write_table
        schedule = os.path.join(args.out, "costs.json")
        if rank == 0:
            doc_path = os.path.join(args.out, "loaded_rank0.magi")
            magi_aot.save_doc(region.doc, doc_path)
            measured, _ = profile(doc_path, device="cuda", iters=10)
            write_table(schedule, build_table(measured))
        dist.barrier()
    # the members of every group the region names, from the model's meshes
    from magi_aot.runtime.groups import collective_groups
    used = collective_groups([region.doc])
    groups = None if args.one_artifact else {k: v for k, v in tm.mesh_groups(model).items() if k in used}
    rt = SymmRuntime([region], device=dev, keep_cast_pad=keep, groups=groups, schedule=schedule)
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
    values = {p["name"]: v for p, v in zip([p for p in loaded.placeholders if "tokens" in p["name"]], inputs)}
    args_in = rt.args(region, values)
    if run.startswith("overlap"):
        res = {"run": run, "device": str(dev), "load_s": t_load, "bind_s": t_bind,
               "plan_sha256": rt.plan_sha256, "gathers": len(loaded.rewrite_report),
               "rewritten": sum(g["reason"] == "rewritten" for g in loaded.rewrite_report)}
        res.update(_overlap(args, rt, region, args_in, rank))
        rt.close()
        return res
    if run.startswith("code"):
        # the region compiled by rt.compile into DIR/code (run "code"), then
        # served from there in fresh processes (run "code_again")
        want = torch.load(os.path.join(args.out, "rank%d.compiled.pt" % rank), map_location=dev)
        t0 = time.perf_counter()
        fn, rep = rt.compile(region, os.path.join(args.out, "code"))
        t_code = time.perf_counter() - t0
        with torch.no_grad():
            out = fn(*args_in)[0]
        rel, abs_ = INDUCTOR_TOL[args.mp]
        err = float((out.float() - want.float()).abs().max())
        res = {"run": run, "device": str(dev), "plan_sha256": rt.plan_sha256, "served": rep["served"],
               "reason": rep.get("reason"), "compile_or_load_s": t_code, "max_abs_compiled": err,
               "within_tol": err <= rel * float(want.float().abs().max()) + abs_}
        res["ok"] = res["within_tol"] and (run == "code" or rep["served"] == "stored")
        rt.close()
        return res
    gm = rt.graph_module(region)
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
               "--size", args.size, "--iters", str(args.iters), "--lead-ms", str(args.lead_ms),
               "--layout", args.layout]
        if args.one_artifact:
            cmd.append("--one-artifact")
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
    ap.add_argument("--one-artifact", action="store_true",
                    help="every rank loads the region rank 0 saved and passes no groups= (the runtime "
                         "places each group on its mesh dimension); the default for the MoE layouts "
                         "is each rank's own region with the groups read off the model's meshes")
    ap.add_argument("--runs", default=None,
                    help="comma-separated runs from one save: bind (cast and pad at bind), "
                         "keep (cast and pad kept on c10d); default bind")
    ap.add_argument("--keep-cast-pad", action="store_true", help="the same as --runs keep")
    ap.add_argument("--inductor", action="store_true",
                    help="the bind run also through Inductor (compile_fx of the rebuilt graph)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--size", default="tiny",
                    help="the model's size (titan_model.SIZES): tiny, or llama3-8b-layers for the "
                         "overlap benchmark on a GPU")
    ap.add_argument("--iters", type=int, default=10, help="overlap run: timed forwards of each form")
    ap.add_argument("--lead-ms", type=float, default=50.0,
                    help="overlap run: the spin that holds the GPU while the host queues a forward")
    args = ap.parse_args()
    import titan_model
    titan_model.set_size(args.size)
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
        ", ".join(RUN_WORDS.get(r, r) for r in runs),
        ", Inductor" if args.inductor else ""))


if __name__ == "__main__":
    sys.exit(main())
