#!/usr/bin/env python3
"""A SimpleFSDP-style model run end to end from its artifact.

    python3 examples/fsdp_e2e.py all --out DIR [--device cpu|cuda] [--world 4]
        [--inductor] [--bench N] [--mismatch]

  trace   build the model on rank 0 of a fake process group (DTensor
          weights sharded on dim 0, functional-collective gathers), trace
          it with torch.compile and the magi_aot save backend, save the
          region to DIR/fsdp.magi
  run     (one rank; torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR,
          MASTER_PORT) load DIR/fsdp.magi with transport="copy_engine",
          bind this rank's shards in a SymmRuntime, run the rebuilt graph
          and compare with the unsharded model: eager bit-exact; with
          --inductor, compiled by Inductor from the rebuilt fake inputs,
          within bf16 tolerance; torch.library.opcheck on both operators;
          --bench N: host time in the symm operators per forward and step
          time against the same region with every gather on c10d
          (transport="nccl"); --bad-plan-rank R: rank R plans with another
          window cap and every rank must fail naming it
  launch  start --world rank processes of `run` with torchrun's
          environment (what `torchrun --nproc-per-node N` would do)
  all     trace, launch run, and with --mismatch launch the mismatch check

The model (tiny; the layout of fixtures/real/fsdp_block.json): `layers`
dense layers (wq, wo: DTensors on the world group "0"), an fp32 weight cast
to bf16 before its gather (kept on c10d: cast), a padded weight (every rank
holds `odd` rows padded by one: kept on c10d: pad), w_down, and an expert
pair gathered coalesced on a second group "1" (ranks paired {0,1}, {2,3},
...). The gathers that stay on c10d run on gloo (CPU, or fewer GPUs than
ranks: the ranks share the device) or NCCL (one GPU per rank).

Every rank writes DIR/rank<R>.json; the launcher prints one summary line per
rank and exits non-zero when a rank failed.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

D, FFN, LAYERS, ODD, EXPERT, SEQ, SEED = 64, 128, 2, 15, 64, 24, 1234


# ------------------------------------------------------------------ weights
def full_weights(world, device="cpu"):
    """The unsharded weights (deterministic): {fqn: tensor}."""
    import torch
    g = torch.Generator().manual_seed(SEED)

    def w(rows, cols, dtype=torch.bfloat16):
        return (torch.randn(rows, cols, generator=g) * cols ** -0.5).to(dtype).to(device)
    out = {}
    for i in range(LAYERS):
        out["layers.%d.wq" % i] = w(D, D)
        out["layers.%d.wo" % i] = w(D, D)
    out["w_up_fp32"] = w(FFN, D, torch.float32)
    out["w_down"] = w(D, FFN)
    out["w_odd"] = w(world * ODD, D)
    out["expert_a"] = w(EXPERT, D)
    out["expert_b"] = w(EXPERT, D)
    return out


def shards_of(full, rank, world):
    """This rank's local shards: dense weights split on dim 0 over the
    world; w_odd split into `ODD` rows per rank (padded at use); the experts
    split over the rank's pair."""
    out = {}
    for k, t in full.items():
        if k.startswith("expert"):
            n = t.shape[0] // 2
            out[k] = t[(rank % 2) * n:(rank % 2 + 1) * n].clone()
        else:
            n = t.shape[0] // world
            out[k] = t[rank * n:(rank + 1) * n].clone()
    return out


def pairs(world):
    return [[r, r + 1] for r in range(0, world, 2)]


def reference(x, full, world):
    """The unsharded model: the same operations on the full weights."""
    import torch
    import torch.nn.functional as F
    h = x
    for i in range(LAYERS):
        h = h + F.linear(F.silu(F.linear(h, full["layers.%d.wq" % i])), full["layers.%d.wo" % i])
    up = full["w_up_fp32"].to(torch.bfloat16)
    h = h + F.linear(F.silu(F.linear(h, up)), full["w_down"])
    h = h + F.linear(h, full["w_odd"]).sum(-1, keepdim=True)
    ea, eb = full["expert_a"], full["expert_b"]
    return h + F.linear(F.silu(F.linear(h, ea)), eb.t())


# -------------------------------------------------------------------- model
def make_model(world, device):
    """The SimpleFSDP-style module of rank 0 (DTensor parameters over a
    DeviceMesh of the fake world, plain shards for w_odd and the experts)."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard

    world_pg = dist.group.WORLD
    pair_pg = None
    for p in pairs(world):  # every rank creates every group; rank 0 keeps {0, 1}
        g = dist.new_group(p)
        if 0 in p:
            pair_pg = g
    mesh = DeviceMesh(device.type, list(range(world)))
    sh = shards_of(full_weights(world, device), 0, world)

    def param(t, dtensor):
        v = DTensor.from_local(t, mesh, [Shard(0)], run_check=False) if dtensor else t
        return nn.Parameter(v, requires_grad=False)

    class Layer(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.wq = param(sh["layers.%d.wq" % i], True)
            self.wo = param(sh["layers.%d.wo" % i], True)

        def forward(self, h):
            wq = fc.all_gather_tensor(self.wq.to_local(), 0, world_pg)
            wo = fc.all_gather_tensor(self.wo.to_local(), 0, world_pg)
            return h + F.linear(F.silu(F.linear(h, wq)), wo)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Layer(i) for i in range(LAYERS))
            self.w_up_fp32 = param(sh["w_up_fp32"], True)
            self.w_down = param(sh["w_down"], True)
            self.w_odd = param(sh["w_odd"], False)
            self.expert_a = param(sh["expert_a"], False)
            self.expert_b = param(sh["expert_b"], False)

        def forward(self, x):
            h = x
            for layer in self.layers:
                h = layer(h)
            up = fc.all_gather_tensor(self.w_up_fp32.to_local().to(torch.bfloat16), 0, world_pg)
            down = fc.all_gather_tensor(self.w_down.to_local(), 0, world_pg)
            h = h + F.linear(F.silu(F.linear(h, up)), down)
            odd = fc.all_gather_tensor(F.pad(self.w_odd, (0, 0, 0, 1)), 0, world_pg)
            odd = odd.view(world, ODD + 1, D)[:, :ODD].reshape(world * ODD, D)
            h = h + F.linear(h, odd).sum(-1, keepdim=True)
            ea, eb = fc.all_gather_into_tensor_coalesced([self.expert_a, self.expert_b], pair_pg)
            return h + F.linear(F.silu(F.linear(h, ea)), eb.t())

    return Model()


def trace(out, world, device):
    """Trace the model on rank 0 of a fake process group; save the region."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import magi_aot
    os.makedirs(out, exist_ok=True)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        dev = torch.device(device)
        model = make_model(world, dev)
        gms = []

        def capture(gm, example_inputs):
            gms.append(gm)
            return backend(gm, example_inputs)
        backend = magi_aot.save_backend(os.path.join(out, "cache"), "fsdp_e2e", strict=True)
        x = torch.randn(2, SEQ, D, dtype=torch.bfloat16, device=dev)
        torch._dynamo.mark_dynamic(x, 1)
        with torch.no_grad():
            torch.compile(model, backend=capture, fullgraph=True)(x)
        assert len(gms) == 1, "expected one region, got %d" % len(gms)
        info = magi_aot.save(gms[0], os.path.join(out, "fsdp.magi"), model_tag="fsdp_e2e")
        with open(os.path.join(out, "model.json"), "w") as f:
            json.dump({"world": world, "device": device, "nodes": info["nodes"],
                       "fingerprint": info["fingerprint"]}, f)
        print("traced: %d nodes, %d bytes -> %s" % (info["nodes"], info["bytes"], info["path"]))
    finally:
        dist.destroy_process_group()
        torch._dynamo.reset()


# ---------------------------------------------------------------------- run
def _device(kind):
    import torch
    if kind == "cpu":
        return torch.device("cpu")
    n = torch.cuda.device_count()
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    return torch.device("cuda", local % n)


def _pg_backend(dev, world):
    import torch
    if dev.type == "cuda" and torch.cuda.device_count() >= world:
        return "nccl"
    return "gloo"  # CPU, or ranks sharing a GPU (NCCL refuses two ranks on one device)


def _opcheck(rt, bound):
    """torch.library.opcheck on both operators with this rank's real shards."""
    import torch
    from torch.library import opcheck
    wq = bound["L_self_modules_layers_modules_0_parameters_wq_"]
    ea = bound["L_self_parameters_expert_a_"]
    eb = bound["L_self_parameters_expert_b_"]
    # opcheck reads the outputs without wait_tensor: the current stream must
    # wait at the call (join="call"), else it could read unfinished copies
    join, rt.join = rt.join, "call"
    try:
        opcheck(torch.ops.magi.symm_all_gather.default, (wq, rt.world, "0"))
        opcheck(torch.ops.magi.symm_all_gather_coalesced.default, ([ea, eb], 2, "1"))
    finally:
        rt.join = join
    return True


def run(args):
    import torch
    import torch.distributed as dist
    import magi_aot
    from magi_aot.runtime import SymmRuntime
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = _device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    res = {"rank": rank, "world": world, "device": str(dev), "ok": False}
    out_json = os.path.join(args.out, "rank%d%s.json" % (rank, args.tag))
    t_start = time.monotonic()
    try:
        pgb = _pg_backend(dev, world)
        dist.init_process_group(pgb, timeout=__import__("datetime").timedelta(seconds=120))
        res["c10d_backend"] = pgb
        art = os.path.join(args.out, "fsdp.magi")
        region = magi_aot.load(art, transport="copy_engine")
        groups = {"0": [list(range(world))], "1": pairs(world)}
        bad = args.bad_plan_rank
        t0 = time.monotonic()
        try:
            rt = SymmRuntime([region], device=dev, groups=groups, timeout=args.timeout,
                             window_cap_bytes=(1 << 20) if rank == bad else 0)
        except magi_aot.MagiError as e:
            res.update(error=e.message, status=e.status, seconds=time.monotonic() - t0,
                       ok=bad is not None)
            return res
        if bad is not None:
            res.update(error="rank %d bound a different plan and the runtime did not fail" % bad)
            return res
        res["plan_sha256"] = rt.plan_sha256
        res["windows"] = rt.windows
        full = full_weights(world, dev)
        sh = shards_of(full, rank, world)
        if args.mode == "alias":
            views = rt.alias()
            for k, v in views.items():  # fill the window in place: no other copy exists
                v.copy_(sh[_fqn_of(k)])
            rt.bind({k: v for k, v in sh.items() if rt._slot_for(k) is None}, strict=False)
            bound = views
        else:
            bound = rt.bind(sh)
        rt.ready()
        sched = rt.schedule_report
        res["schedule_mode"] = sched["mode"]
        res["schedule_moved"] = sum(len(r["moved"]) for r in sched["regions"])
        res["schedule_bound"] = [r["max_inflight_bytes"] for r in sched["regions"]]
        res["schedule_gathers"] = [{k: g[k] for k in ("node", "launch_index", "first_use_index",
                                                      "stall_us", "inflight_bytes")}
                                   for r in sched["regions"] for g in r["gathers"]]
        res["n_rewritten"] = region.n_rewritten
        res["kept"] = [(g["name"], g["reason"]) for g in region.rewrite_report
                       if g["reason"] != "rewritten"]
        res["copy_engine"] = [g["name"] + (" (coalesced)" if g.get("coalesced") else "")
                              for g in region.rewrite_report if g["reason"] == "rewritten"]
        gm = rt.graph_module(region)
        g = torch.Generator().manual_seed(SEED + 1)
        x = torch.randn(2, SEQ, D, generator=g).to(torch.bfloat16).to(dev)
        inputs = rt.args(region, {"x": x})
        with torch.no_grad():
            ref = reference(x, full, world)
            out = gm(*inputs)
        out = out[0] if isinstance(out, (tuple, list)) else out
        res["eager_bit_exact"] = bool(torch.equal(out, ref))
        res["eager_max_abs"] = float((out.float() - ref.float()).abs().max())
        res["opcheck"] = _opcheck(rt, bound)
        if args.inductor:
            res.update(_inductor(rt, region, gm, inputs, ref, rank))
        if args.bench:
            res.update(_bench(args, rt, region, gm, inputs, groups, dev))
        res["ok"] = res["eager_bit_exact"] and res.get("inductor_ok", True)
        dist.barrier()
        rt.close()
        return res
    except Exception as e:  # noqa: BLE001 - reported per rank
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["traceback"] = traceback.format_exc()[-3000:]
        return res
    finally:
        res["total_seconds"] = time.monotonic() - t_start
        with open(out_json, "w") as f:
            json.dump(res, f, indent=1, default=str)
        if dist.is_initialized():
            dist.destroy_process_group()


def _fqn_of(weight):
    """Slot weight (Dynamo placeholder target) -> the model's FQN."""
    w = weight[len("L_self_"):-1]
    w = w.replace("modules_", "").replace("parameters_", "")
    parts = w.split("_")
    if parts[0] == "layers":
        return "layers.%s.%s" % (parts[1], "_".join(parts[2:]))
    return w


def _inductor(rt, region, gm, inputs, ref, rank):
    """Compile the rank-local region with Inductor from its rebuilt fake
    inputs (rank 0 first; the others then hit the FX graph cache), run it."""
    import torch
    import torch.distributed as dist
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from magi_aot.compile.launch_order import compile_and_read
    out = {}
    t0 = time.monotonic()
    for turn in (0, 1):
        if (rank == 0) == (turn == 0):
            fake_mode = FakeTensorMode(shape_env=ShapeEnv())
            fakes = rt.fake_inputs(region, fake_mode)
            compiled, overlap, module = compile_and_read(
                lambda: compile_fx(rt.graph_module(region), fakes))
            if overlap is not None:
                out["inductor_overlap"], out["inductor_module"] = overlap, module
        dist.barrier()
    out["inductor_compile_seconds"] = time.monotonic() - t0
    # the region as loaded, unscheduled, through the same compile: the
    # schedule changes the order, never the result
    plain = rt.graph_module(region, scheduled=False)
    compiled_plain = compile_fx(plain, rt.fake_inputs(region, FakeTensorMode(shape_env=ShapeEnv())))
    with torch.no_grad():
        got = compiled(*inputs)
        got_plain = compiled_plain(*inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got
    got_plain = got_plain[0] if isinstance(got_plain, (tuple, list)) else got_plain
    out["inductor_matches_unscheduled"] = bool(torch.equal(got, got_plain))
    diff = (got.float() - ref.float()).abs()
    tol = 2e-2 * ref.float().abs().max().item() + 1e-2
    out["inductor_max_abs"] = float(diff.max())
    out["inductor_tol"] = tol
    out["inductor_ok"] = bool(diff.max().item() <= tol)
    return out


def _bench(args, rt, region, gm, inputs, groups, dev):
    """Host time in the symm operators per forward, and step time of the
    region with copy-engine gathers vs every gather on c10d."""
    import torch
    import torch.distributed as dist
    import magi_aot
    from magi_aot.runtime import SymmRuntime

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dist.barrier()

    def timed(fn, n):
        with torch.no_grad():
            for _ in range(3):
                fn()
            sync()
            ts = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                ts.append(time.perf_counter() - t0)
        ts.sort()
        return ts[len(ts) // 2]

    n = args.bench
    before = dict(rt.stats)
    step_symm = timed(lambda: gm(*inputs), n)
    calls = rt.stats["gather_calls"] - before["gather_calls"]
    host = rt.stats["host_seconds"] - before["host_seconds"]
    fwd = n + 3
    out = {"bench_forwards": n, "symm_calls_per_forward": calls / fwd,
           "symm_host_us_per_forward": 1e6 * host / fwd,
           "step_ms_copy_engine": 1e3 * step_symm}
    # the same region with every gather on c10d
    plain = magi_aot.load(os.path.join(args.out, "fsdp.magi"), transport="nccl")
    rt2 = SymmRuntime([plain], device=dev, groups=groups, timeout=args.timeout, job="magi_plain")
    full = full_weights(rt.world, dev)
    rt2.bind(shards_of(full, rt.rank, rt.world), strict=False)
    gm2 = rt2.graph_module(plain)
    x = inputs[[p["name"] for p in region.placeholders].index("l_x_")]
    in2 = rt2.args(plain, {"x": x})
    out["step_ms_all_c10d"] = 1e3 * timed(lambda: gm2(*in2), n)
    rt2.close()
    return out


# ------------------------------------------------------------------- launch
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, extra):
    """Start `world` rank processes with torchrun's environment."""
    port = _free_port()
    procs = []
    for r in range(args.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.world), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(args.world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TORCHINDUCTOR_CACHE_DIR=os.path.join(args.out, "inductor"))
        cmd = [sys.executable, os.path.abspath(__file__), "run", "--out", args.out,
               "--device", args.device, "--timeout", str(args.timeout)] + extra
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + args.launch_timeout
    logs = []
    for p in procs:
        try:
            o, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            o, _ = p.communicate()
            o += "\n[killed after %d s]" % args.launch_timeout
        logs.append(o)
    return [p.returncode for p in procs], logs


def summarize(args, tag, want_fail=False):
    bad = 0
    results = []
    for r in range(args.world):
        path = os.path.join(args.out, "rank%d%s.json" % (r, tag))
        try:
            with open(path) as f:
                res = json.load(f)
        except OSError:
            res = {"rank": r, "ok": False, "error": "no result file"}
        results.append(res)
        keys = ("c10d_backend", "eager_bit_exact", "eager_max_abs", "opcheck", "inductor_ok",
                "inductor_max_abs", "inductor_compile_seconds", "symm_calls_per_forward",
                "symm_host_us_per_forward", "step_ms_copy_engine", "step_ms_all_c10d",
                "status", "seconds", "error")
        print("rank %d: %s %s" % (r, "PASS" if res.get("ok") else "FAIL",
                                  json.dumps({k: res[k] for k in keys if k in res})), flush=True)
        if not res.get("ok"):
            bad += 1
            if res.get("traceback"):
                print(res["traceback"])
    if want_fail:
        msgs = {res.get("error") for res in results}
        same = len(msgs) == 1 and None not in msgs
        print("mismatch: every rank failed with one message: %s" % ("PASS" if same and not bad
                                                                    else "FAIL"))
        bad += 0 if same else 1
    return bad, results


def transport_line(results):
    """What went where, from the ranks' results (rank 0's, which every rank
    shares): "N gathers on the copy engine (names); M kept on c10d (name:
    why, ...)", or "" when no rank got as far as the load."""
    res = next((r for r in results if "copy_engine" in r), None)
    if res is None:
        return ""
    kept = res.get("kept") or []
    return "%d gather%s on the copy engine (%s); %d kept on c10d (%s)" % (
        len(res["copy_engine"]), "" if len(res["copy_engine"]) == 1 else "s",
        ", ".join(res["copy_engine"]) or "none", len(kept),
        ", ".join("%s: %s" % (n, why) for n, why in kept) or "none")


def parser():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Commands: trace (save the region), run (one rank, under torchrun's environment), "
               "launch (start --world ranks of run), all (trace, then launch); the file's "
               "docstring says more. The last line says PASS or FAIL and which weight gathers "
               "went to the copy engine and which stayed on c10d, and why.")
    ap.add_argument("cmd", choices=["trace", "run", "launch", "all"],
                    help="trace: save DIR/fsdp.magi; run: one rank from torchrun's environment; "
                         "launch: start --world run processes; all: trace then launch")
    ap.add_argument("--out", required=True, metavar="DIR",
                    help="directory for the artifact, every rank's result (rank<R>.json) and "
                         "Inductor's cache")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where the ranks run (default cpu; cuda: one GPU per rank when there are "
                         "enough, else the ranks share one)")
    ap.add_argument("--world", type=int, default=4, metavar="N",
                    help="number of rank processes (default 4; the expert pair's group needs an even N)")
    ap.add_argument("--mode", default="copy", choices=["copy", "alias"],
                    help="how each rank binds its shards: copy them into the SymmBuffer windows "
                         "(default), or alias: take views of the window memory and fill them in place")
    ap.add_argument("--inductor", action="store_true",
                    help="also compile the rebuilt graph with Inductor and compare (bf16 tolerance)")
    ap.add_argument("--bench", type=int, default=0, metavar="N",
                    help="time N forwards: host time in the symm operators and step time against "
                         "every gather on c10d (default 0: no timing)")
    ap.add_argument("--bad-plan-rank", type=int, default=None, metavar="R",
                    help="rank R plans with another window cap: every rank must fail naming it "
                         "(the mismatch check alone)")
    ap.add_argument("--mismatch", action="store_true",
                    help="all: after the run, also launch the mismatch check (the last rank plans "
                         "differently)")
    ap.add_argument("--timeout", type=float, default=30.0, metavar="S",
                    help="seconds a rank waits at the SymmRuntime's rendezvous (default 30)")
    ap.add_argument("--launch-timeout", type=float, default=300.0, metavar="S",
                    help="seconds launch waits for every rank before killing it (default 300)")
    ap.add_argument("--tag", default="", metavar="SUFFIX",
                    help="suffix of the result files (rank<R>SUFFIX.json), to keep runs apart")
    return ap


def main(argv=None):
    a = parser().parse_args(argv)
    if a.cmd == "trace":
        trace(a.out, a.world, "cuda" if a.device == "cuda" else "cpu")
        return 0
    if a.cmd == "run":
        res = run(a)
        return 0 if res.get("ok") else 1
    extra = ["--mode", a.mode] + (["--inductor"] if a.inductor else []) \
        + (["--bench", str(a.bench)] if a.bench else [])
    if a.cmd == "all":
        trace(a.out, a.world, a.device)
    if a.bad_plan_rank is not None:  # launch of the mismatch check alone
        t0 = time.monotonic()
        rcs, logs = launch(a, ["--bad-plan-rank", str(a.bad_plan_rank), "--tag", a.tag])
        print("mismatch check: all ranks returned in %.1f s" % (time.monotonic() - t0))
        bad, _ = summarize(a, a.tag, want_fail=True)
        return 1 if bad else 0
    rcs, logs = launch(a, extra)
    bad, results = summarize(a, "")
    if bad:
        for r, log in enumerate(logs):
            print("---- rank %d (exit %s)\n%s" % (r, rcs[r], log[-4000:]))
    if a.cmd == "all" and a.mismatch:
        t0 = time.monotonic()
        rcs2, logs2 = launch(a, ["--bad-plan-rank", str(a.world - 1), "--tag", ".mismatch"])
        print("mismatch check: all ranks returned in %.1f s" % (time.monotonic() - t0))
        b2, _ = summarize(a, ".mismatch", want_fail=True)
        if b2:
            for r, log in enumerate(logs2):
                print("---- rank %d (exit %s)\n%s" % (r, rcs2[r], log[-4000:]))
        bad += b2
    where = transport_line(results)
    print("fsdp_e2e: %s%s" % ("FAIL" if bad else "PASS", ": " + where if where else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
