#!/usr/bin/env python3
"""Predicted vs measured exposed time of each gather, fixtures/real/fsdp_block.json
run as a real region on the GPU.

    MAGI_AOT_LIB=.../libmagi_aot.so MAGI_CLI=.../magi-aot \
      python3 python/tests/gpu/exposed.py --out DIR [--world 4] [--iters 40] [--costs T.json]

1. The region is loaded with the copy_engine transport and written out
   rewritten (`magi-aot load --emit`), then scheduled (`magi-aot schedule
   --emit --json`): the analytical model, and with --costs the measured cost
   table (python -m magi_aot.profile) too; the scheduled region of the last
   one is what runs. The schedule's JSON gives each gather's predicted stall
   (exposed time).
2. `--world` rank processes share the GPU(s) (rank r on device r % count):
   a SymmRuntime binds random shards in each; then only rank 0 runs (the
   others keep their windows mapped and wait), so no other process's work
   is time-sliced with the measured one on a shared GPU. The gathers that
   stay on c10d (cast, pad) are replaced in rank 0's graph by a local
   stand-in of the same shape (the shard repeated): NCCL cannot run several
   ranks on one GPU, and gloo staged through the host would stall the
   stream for milliseconds. Their exposure is not measured.
3. Rank 0 runs the rebuilt graph eagerly (the GPU held back by a spin
   kernel while the host queues the whole forward, so the events time the
   device, not the host's launch gaps) with CUDA events around every
   gather call and every wait_tensor, alternating the runtime's join mode
   per iteration: "wait" (the stream waits at wait_tensor: the copies run
   beside the compute scheduled between the gather and its wait) and "call"
   (the stream waits at the call: nothing overlaps). A gather's measured
   exposed time is the time the compute stream spent waiting for it: at its
   waits under "wait", at its call under "call". The forward's device time
   is measured in both modes, and the outputs of the two modes must be
   bit-identical. On CUDA the region is then captured into a CUDA graph
   (joins at wait_tensor) and replayed: the replay must equal eager.

Rank 0 writes DIR/exposed.json and prints a table: per gather, the kind,
predicted cost and stall (analytical, measured table), and the measured
exposed time in both modes (median over --iters). Exit 0 when every rank
ran and the outputs agreed.
"""
import argparse
import functools
import json
import os
import socket
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
FIXTURE = os.path.join(ROOT, "fixtures", "real", "fsdp_block.json")
GATHER_BASES = ("symm_all_gather", "symm_all_gather_coalesced", "all_gather_into_tensor",
                "all_gather_into_tensor_coalesced", "host_staged_all_gather",
                "host_staged_all_gather_coalesced")


def _median(v):
    """The middle of v (the upper one of an even count), None when empty."""
    v = sorted(v)
    return v[len(v) // 2] if v else None


def _first(o):
    """A region's first output (regions return a tuple or list)."""
    return o[0] if isinstance(o, (tuple, list)) else o


def _cli():
    cli = os.environ.get("MAGI_CLI")
    if not cli:
        sys.exit("set MAGI_CLI to the magi-aot executable")
    return cli


def _run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=120)
    if p.returncode:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr[-2000:]))
    return p.stdout


def prepare(out, costs):
    """Rewritten + scheduled regions and the predictions: {"analytical": sched
    json, "measured": sched json or None, "run": path of the region to run}."""
    cli = _cli()
    rw = os.path.join(out, "fsdp_block.rewritten.magi")
    _run(cli, "load", FIXTURE, "--transport", "copy_engine", "--emit", rw)
    res = {}
    sa = os.path.join(out, "fsdp_block.sched.analytical.magi")
    res["analytical"] = json.loads(_run(cli, "schedule", rw, "--json", "--emit", sa))
    res["run"] = sa
    res["measured"] = None
    if costs:
        sm = os.path.join(out, "fsdp_block.sched.measured.magi")
        res["measured"] = json.loads(_run(cli, "schedule", rw, "--costs", costs, "--json", "--emit", sm))
        res["run"] = sm
    return res


# ----------------------------------------------------------------- one rank
def _base(target):
    name = getattr(target, "__name__", None) or str(target)
    s = str(getattr(target, "_name", "") or name)
    for b in sorted(GATHER_BASES, key=len, reverse=True):
        if b in s or b in name:
            return b
    return None


def _gather_of(node):
    """The gather node a wait_tensor's input comes from (through getitem)."""
    import operator
    x = node.args[0] if node.args else None
    while x is not None and x.op == "call_function" and x.target is operator.getitem:
        x = x.args[0]
    return x


class _HostStamp:
    """CPU stand-in for a CUDA event (the script's own check on CPU)."""

    def __init__(self):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


def instrument(gm, marks, cuda=True):
    """Event markers around every gather call and wait_tensor of gm:
    marks is a list the markers append (tag, where, event) to."""
    import torch

    def mark(tag, where):
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
        else:
            ev = _HostStamp()
        marks.append((tag, where, ev))
    g = gm.graph
    for n in list(g.nodes):
        if n.op != "call_function":
            continue
        t = n.target
        if t is torch.ops._c10d_functional.wait_tensor or t is torch.ops._c10d_functional.wait_tensor.default:
            src = _gather_of(n)
            if src is None or _base(src.target) is None:
                continue
            tag, where = src.name, "wait"
        elif _base(t) is not None:
            tag, where = n.name, "call"
        else:
            continue
        with g.inserting_before(n):
            g.call_function(mark, (tag, where + ":pre"))
        with g.inserting_after(n):
            g.call_function(mark, (tag, where + ":post"))
    gm.recompile()
    return gm


def standin_all_gather(input, group_size, group_name):  # noqa: ARG001 - the c10d signature
    """A kept gather's local stand-in: the output's shape, no communication."""
    import torch
    return torch.cat([input] * group_size)


def standin_all_gather_coalesced(inputs, group_size, group_name):
    return [standin_all_gather(x, group_size, group_name) for x in inputs]


@functools.lru_cache(maxsize=None)
def _standin_ops():
    """The stand-ins as operators (magi_bench::kept_gather*), so a compiled
    region calls them as Inductor calls a collective: an extern call the
    profiler names, not a cat fused into the neighbouring kernels. Defined
    with a plain kernel (no custom_op autograd wrapper) to keep their own
    host cost near a c10d call's."""
    import torch
    lib = torch.library.Library("magi_bench", "FRAGMENT")
    lib.define("kept_gather(Tensor input, int group_size, str group_name) -> Tensor")
    lib.define("kept_gather_coalesced(Tensor[] inputs, int group_size, str group_name) -> Tensor[]")
    lib.impl("kept_gather", standin_all_gather, "CompositeExplicitAutograd")
    lib.impl("kept_gather_coalesced", standin_all_gather_coalesced, "CompositeExplicitAutograd")

    def fake_one(input, group_size, group_name):
        return input.new_empty((input.shape[0] * group_size,) + tuple(input.shape[1:]))

    def fake_many(inputs, group_size, group_name):
        return [fake_one(x, group_size, group_name) for x in inputs]
    torch.library.register_fake("magi_bench::kept_gather", fake_one, lib=lib)
    torch.library.register_fake("magi_bench::kept_gather_coalesced", fake_many, lib=lib)
    return {"lib": lib, "one": torch.ops.magi_bench.kept_gather.default,
            "coalesced": torch.ops.magi_bench.kept_gather_coalesced.default}


def replace_kept(gm, as_ops=False):
    """Kept (c10d or host-staged) gathers -> local stand-ins (Python
    functions, or with as_ops the magi_bench operators); their names."""
    ops = _standin_ops() if as_ops else None
    out = []
    for n in gm.graph.nodes:
        b = _base(n.target) if n.op == "call_function" else None
        if b in ("all_gather_into_tensor", "host_staged_all_gather"):
            n.target = ops["one"] if ops else standin_all_gather
        elif b in ("all_gather_into_tensor_coalesced", "host_staged_all_gather_coalesced"):
            n.target = ops["coalesced"] if ops else standin_all_gather_coalesced
        else:
            continue
        out.append(n.name)
    gm.recompile()
    return out


def _values(torch, region, dev, length=None):
    """Random values at the hints for every placeholder (weights included);
    with length, only the placeholders with a symbolic size, every symbol
    set to length (the activations at another sequence length)."""
    from magi_aot.fx import expr as _expr
    hints = {k: (length if length else v) for k, v in region.symbols.items() if v is not None}
    out = {}
    g = torch.Generator().manual_seed(7)
    for p in region.placeholders:
        ex = p["example_value"] or {}
        if ex.get("kind") != "tensor":
            continue
        if length and all(isinstance(d, int) for d in ex["shape"]):
            continue
        shape = [d if isinstance(d, int) else _expr.eval_int(d, hints) for d in ex["shape"]]
        dt = getattr(torch, ex["dtype"])
        t = torch.randn(shape, generator=g) * 0.05
        out[p["name"]] = t.to(dt).to(dev)
    return out


def rank_main(args):
    import torch
    import torch.distributed as dist
    import magi_aot
    from magi_aot.runtime import SymmRuntime
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    res = {"rank": rank, "ok": False}
    try:
        cuda = args.device == "cuda"
        if cuda:
            dev = torch.device("cuda", rank % torch.cuda.device_count())
            torch.cuda.set_device(dev)
        else:
            dev = torch.device("cpu")
            torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        region = magi_aot.load(args.region, transport="copy_engine")
        groups = {"0": [list(range(world))], "1": [[r, r + 1] for r in range(0, world, 2)]}
        rt = SymmRuntime([region], device=dev, groups=groups, timeout=120)
        vals = _values(torch, rt.regions[0], dev)
        rt.bind(vals, strict=True)
        rt.ready()
        if rank != 0:  # keep the windows mapped until rank 0 has measured
            dist.barrier()
            rt.close()
            res.update(ok=True, role="window holder")
            return 0
        gm = rt.graph_module(region)
        res["standins"] = replace_kept(gm)
        marks = []
        instrument(gm, marks, cuda)
        inputs = rt.args(region, {k: v for k, v in vals.items() if rt._slot_for(k) is None})  # bound: not again
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        per = {"wait": {}, "call": {}}
        host_us = {"wait": [], "call": []}
        host_ahead = []
        fwd = {"wait": [], "call": []}
        outs = {}
        with torch.no_grad():
            for it in range(args.warmup + 2 * args.iters):
                mode = "wait" if it % 2 == 0 else "call"
                rt.join = mode
                marks.clear()
                sync()
                if cuda:
                    # the host queues the whole forward while the GPU spins
                    # here, so the events time the device alone: an eager
                    # forward of small ops is otherwise host-bound, and the
                    # gaps between the host's launches would read as stalls
                    torch.cuda._sleep(args.lead_cycles)
                start = torch.cuda.Event(enable_timing=True) if cuda else _HostStamp()
                if cuda:
                    start.record()
                t_host = time.perf_counter()
                o = gm(*inputs)
                end = torch.cuda.Event(enable_timing=True) if cuda else _HostStamp()
                if cuda:
                    end.record()
                    host_ahead.append(not end.query())  # the GPU had not finished: it never waited for the host
                host_us[mode].append((time.perf_counter() - t_host) * 1e6)
                sync()
                if it < args.warmup:
                    continue
                fwd[mode].append(start.elapsed_time(end) * 1e3)
                stall = {}
                pre = {}
                for tag, where, ev in marks:
                    kind, edge = where.split(":")
                    if edge == "pre":
                        pre[(tag, kind)] = ev
                    else:
                        us = pre.pop((tag, kind)).elapsed_time(ev) * 1e3
                        d = stall.setdefault(tag, {"call": 0.0, "wait": 0.0})
                        d[kind] += us
                for tag, d in stall.items():
                    per[mode].setdefault(tag, []).append(d)
                outs.setdefault(mode, _first(o).detach().clone())
        res["outputs_equal"] = bool(torch.equal(outs["wait"], outs["call"]))
        res["forward_us"] = {m: _median(v) for m, v in fwd.items()}
        res["forward_host_us"] = {m: _median(v) for m, v in host_us.items()}
        res["host_ahead_fraction"] = (sum(host_ahead) / len(host_ahead)) if host_ahead else None
        res["gathers"] = {}
        for mode in ("wait", "call"):
            for tag, rows in per[mode].items():
                g = res["gathers"].setdefault(tag, {})
                g[mode] = {"at_call_us": _median([r["call"] for r in rows]), "at_wait_us": _median([r["wait"] for r in rows])}
        res["deferred_joins"] = rt.stats["deferred_joins"]
        res["kept"] = [(g["name"], g["reason"]) for g in region.rewrite_report if g["reason"] != "rewritten"]
        if cuda:
            res.update(_capture_check(torch, rt, region, inputs, outs["wait"]))
        if args.host_split:
            def inputs_at(length):
                return inputs if not length else rt.args(region, _values(torch, rt.regions[0], dev, length))
            res["calibration_us"] = _calibrate(torch, inputs, cuda)
            res["host_vs_device"] = _host_vs_device(torch, rt, region, inputs_at, outs["wait"], args, cuda)
        res["ok"] = (res["outputs_equal"] and (res["deferred_joins"] > 0 or not cuda)
                     and res.get("capture_equal", True)
                     and _host_rows_ok(res.get("host_vs_device")))
        dist.barrier()
        rt.close()
    except Exception as e:  # noqa: BLE001 - reported per rank
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["traceback"] = traceback.format_exc()[-3000:]
    finally:
        with open(os.path.join(args.out, "rank%d.json" % rank), "w") as f:
            json.dump(res, f, indent=1, default=str)
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0 if res["ok"] else 1


def _capture_check(torch, rt, region, inputs, want):
    """The region (gathers joined at wait_tensor) captured into a CUDA graph
    and replayed: the replay's output must equal the eager one."""
    out = {}
    try:
        rt.join = "wait"
        gm = rt.graph_module(region)
        replace_kept(gm)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(2):  # warm-up off the capture, as torch asks
                gm(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g):
            static = gm(*inputs)
        static = _first(static)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        out["capture_equal"] = bool(torch.equal(static, want))
        # the replay's host time to queue the forward, and its device time
        host, dev = [], []
        for _ in range(40):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            e0.record()
            g.replay()
            e1.record()
            host.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
            dev.append(e0.elapsed_time(e1) * 1e3)
        out["replay_host_us"] = _median(host)
        out["replay_device_us"] = _median(dev)
    except Exception as e:  # noqa: BLE001 - reported
        out["capture_equal"] = False
        out["capture_error"] = "%s: %s" % (type(e).__name__, e)
    return out


SPLIT_KEYS = (("symm operator", ("magi::symm_all_gather",)),
              ("waits", ("_c10d_functional::wait_tensor",)),
              ("kept gathers (stand-ins)", ("magi_bench::kept_gather",)))


def _host_split(torch, fn, inputs, n=10, dump=None):
    """Host time per forward inside the symm operator, the waits and the kept
    gathers' stand-ins, and the whole forward, from torch.profiler's CPU
    events (self-inclusive op times, so nested calls are not counted twice;
    the profiler's own cost inflates every figure alike). With dump (a path
    prefix): the profiler's op table and cProfile's Python functions."""
    import cProfile
    import io
    import pstats
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            with record_function("magi_bench::forward"):
                fn(*inputs)
    averages = prof.key_averages()
    if dump:
        cp = cProfile.Profile()
        cp.enable()
        for _ in range(n):
            fn(*inputs)
        cp.disable()
        text = io.StringIO()
        pstats.Stats(cp, stream=text).sort_stats("tottime").print_stats(45)
        with open(dump + ".txt", "w") as f:
            f.write("torch.profiler, %d forwards, by self CPU time\n" % n)
            f.write(averages.table(sort_by="self_cpu_time_total", row_limit=45))
            f.write("\n\ncProfile, %d forwards, by own time\n" % n)
            f.write(text.getvalue())
    split = {k: 0.0 for k, _ in SPLIT_KEYS}
    total = 0.0
    for ev in averages:
        if ev.key == "magi_bench::forward":
            total = ev.cpu_time_total / n
            continue
        for k, prefixes in SPLIT_KEYS:
            if ev.key.startswith(prefixes):
                split[k] += ev.cpu_time_total / n
    split["rest (wrapper, kernel launches)"] = max(total - sum(split.values()), 0.0)
    split["forward, profiled"] = total
    return split


def _time_forwards(torch, fn, inputs, lead_cycles, iters, cuda):
    """Median host time to queue one forward, and its device time (the GPU
    held by a spin kernel while the host queues, so the events time the
    device alone), and the fraction of forwards the host finished first."""
    host, dev, ahead = [], [], []
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(iters):
        sync()
        if cuda:
            torch.cuda._sleep(lead_cycles)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        t0 = time.perf_counter()
        fn(*inputs)
        t1 = time.perf_counter()
        if cuda:
            e1.record()
            ahead.append(not e1.query())
        sync()
        host.append((t1 - t0) * 1e6)
        dev.append(e0.elapsed_time(e1) * 1e3 if cuda else host[-1])
    return {"host_us": _median(host), "device_us": _median(dev),
            "host_ahead_fraction": (sum(ahead) / len(ahead)) if ahead else None}


def _host_rows_ok(rows):
    """Every mode that ran agrees with eager, and the eager and Python-wrapper
    modes ran (the C++ wrapper may refuse an operator's schema: reported)."""
    if rows is None:
        return True
    return (all(r.get("within_tolerance") for r in rows.values() if "error" not in r)
            and all("error" not in r for k, r in rows.items()
                    if k.startswith(("eager GraphModule", "Inductor, Python wrapper")))
            and "eager GraphModule" in rows and "Inductor, Python wrapper" in rows)


def _calibrate(torch, inputs, cuda, n=200):
    """Host us per call of a few single operations in this process (medians
    of n), the yardstick for the per-node figures: an out= matmul of the
    region's shape, an add, an empty allocation."""
    x = next(t for t in inputs if isinstance(t, torch.Tensor) and t.dim() == 2)
    a, b = x[:64].contiguous(), x.t().contiguous()
    out = torch.empty(a.shape[0], b.shape[1], dtype=x.dtype, device=x.device)
    cases = {"mm(out=)": lambda: torch.mm(a, b, out=out), "add": lambda: torch.add(a, a),
             "empty": lambda: torch.empty(a.shape, dtype=a.dtype, device=a.device)}
    res = {}
    for name, fn in cases.items():
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        if cuda:
            torch.cuda.synchronize()
        res[name] = _median(ts)
    return res


def _host_vs_device(torch, rt, region, inputs_at, want, args, cuda):
    """The forward as a user's runtime runs it, without instrumentation:
    the rebuilt GraphModule eagerly, compiled by Inductor (its Python
    wrapper, and its C++ wrapper), and on CUDA replayed from a CUDA graph:
    host time to queue it against its device time, and the host split."""
    from torch._inductor import config as ind_config
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch._inductor.graph import GraphLowering
    rt.join = "wait"
    res = {}
    dump = os.path.join(args.out, "host") if args.dump else None
    if dump:
        os.makedirs(dump, exist_ok=True)

    def compiled(cpp_wrapper):
        gm = rt.graph_module(region)
        replace_kept(gm, as_ops=True)
        fakes = rt.fake_inputs(region, FakeTensorMode(shape_env=ShapeEnv()))
        t0 = time.monotonic()
        made = []
        orig = GraphLowering.compile_to_module

        def keep(self):
            mod = orig(self)
            made.append(getattr(mod, "__file__", None))
            return mod
        GraphLowering.compile_to_module = keep
        try:
            with ind_config.patch(cpp_wrapper=cpp_wrapper, fx_graph_cache=not dump):
                fn = compile_fx(gm, fakes)
        finally:
            GraphLowering.compile_to_module = orig
        if dump:
            import shutil
            for i, path in enumerate(p for p in made if p):
                shutil.copy(path, os.path.join(dump, "code_%s_%d%s" % ("cpp" if cpp_wrapper else "py", i,
                                                                       os.path.splitext(path)[1])))
        return fn, time.monotonic() - t0

    def eager():
        gm = rt.graph_module(region)
        replace_kept(gm, as_ops=True)
        if dump:
            with open(os.path.join(dump, "code_eager.py"), "w") as f:
                f.write(gm.code)
        return gm, 0.0
    lengths = [int(x) for x in args.lengths.split(",")]
    modes = [("eager GraphModule", "eager", eager),
             ("Inductor, Python wrapper", "inductor_py", lambda: compiled(False)),
             ("Inductor, C++ wrapper", "inductor_cpp", lambda: compiled(True))]
    at = {L: (inputs_at(L), None) for L in lengths}
    with torch.no_grad():
        for name, tag, make in modes:
            try:
                fn, secs = make()
            except Exception as e:  # noqa: BLE001 - reported per mode
                res[name] = {"error": "%s: %s" % (type(e).__name__, str(e)[:1500])}
                continue
            for L in lengths:
                key = name if not L else "%s, length %d" % (name, L)
                row = res.setdefault(key, {"compile_s": round(secs, 2)})
                xs, ref = at[L]
                try:
                    o = _first(fn(*xs))
                    if L == 0:
                        ref = want
                    elif ref is None:  # eager runs first: its output is the reference
                        ref = o.detach().clone()
                        at[L] = (xs, ref)
                    for _ in range(args.warmup):
                        fn(*xs)
                    tol = 2e-2 * ref.float().abs().max().item() + 1e-2
                    row["max_abs_vs_eager"] = float((o.float() - ref.float()).abs().max())
                    row["within_tolerance"] = row["max_abs_vs_eager"] <= tol
                    row.update(_time_forwards(torch, fn, xs, args.lead_cycles, args.iters, cuda))
                    row["ratio"] = row["host_us"] / row["device_us"] if row["device_us"] else None
                    row["split_us"] = _host_split(torch, fn, xs, dump=dump and os.path.join(
                        dump, "prof_%s_%d" % (tag, L)))
                except Exception as e:  # noqa: BLE001 - reported per mode
                    row["error"] = "%s: %s" % (type(e).__name__, str(e)[:1500])
    return res


# ---------------------------------------------------------------- launcher
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: the script's own check (host backend, host timestamps)")
    ap.add_argument("--lead-cycles", type=int, default=200_000_000,
                    help="GPU cycles spun before each forward while the host queues it (about 0.1 s)")
    ap.add_argument("--costs", default=None, help="a measured cost table (python -m magi_aot.profile)")
    ap.add_argument("--host-split", action="store_true",
                    help="also time the uninstrumented forward: eager, Inductor (Python and C++ wrapper), "
                         "host vs device and the host split")
    ap.add_argument("--lengths", default="0",
                    help="with --host-split: sequence lengths to time the forward at (0: the recorded hint)")
    ap.add_argument("--dump", action="store_true",
                    help="with --host-split: DIR/host/ gets each mode's code and profiles")
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--region", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.rank_main:
        return rank_main(args)
    pred = prepare(args.out, args.costs)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(args.world),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank-main", "--out", args.out,
                               "--region", pred["run"], "--iters", str(args.iters), "--warmup", str(args.warmup),
                               "--device", args.device, "--lead-cycles", str(args.lead_cycles)]
                              + (["--host-split"] if args.host_split else [])
                              + (["--dump"] if args.dump else []) + ["--lengths", args.lengths],
                              env=dict(env, RANK=str(r))) for r in range(args.world)]
    rc = 0
    for p in procs:
        try:
            rc |= p.wait(timeout=400)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = 1
    ranks = []
    for r in range(args.world):
        try:
            with open(os.path.join(args.out, "rank%d.json" % r)) as f:
                ranks.append(json.load(f))
        except (OSError, ValueError):
            ranks.append({"rank": r, "ok": False, "error": "no result"})
    bad = [x for x in ranks if not x.get("ok")]
    for x in bad:
        print("rank %s FAILED: %s" % (x.get("rank"), x.get("error") or x))
        if x.get("traceback"):
            print(x["traceback"])
    r0 = ranks[0]
    summary = {"world": args.world, "iters": args.iters, "predicted": {k: pred[k] for k in ("analytical", "measured")},
               "rank0": r0, "ok": not bad and rc == 0}
    with open(os.path.join(args.out, "exposed.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    if r0.get("gathers"):
        pa = {g["node"]: g for g in pred["analytical"]["gathers"]}
        pm = {g["node"]: g for g in (pred["measured"] or {}).get("gathers", [])}
        print("fsdp_block, %d ranks on %s; exposed time per gather, us (measured: median of %d forwards, rank 0)"
              % (args.world, "the GPU(s)", args.iters))
        print("%-34s %-5s | %8s %8s | %8s %8s | %10s %10s" % ("gather", "kind", "model", "stall", "table",
                                                              "stall", "join=wait", "join=call"))
        for name, a in pa.items():
            m = pm.get(name, {})
            g = r0["gathers"].get(name, {})
            w = g.get("wait", {})
            c = g.get("call", {})
            if name in r0.get("standins", []):
                mw = mc = "stand-in"
            else:
                mw = "%.1f" % ((w.get("at_wait_us") or 0.0) + (w.get("at_call_us") or 0.0))
                mc = "%.1f" % ((c.get("at_wait_us") or 0.0) + (c.get("at_call_us") or 0.0))
            print("%-34s %-5s | %8.1f %8.1f | %8s %8s | %10s %10s" % (
                name, a["kind"], a["cost_us"], a["stall_us"],
                "%.1f" % m["cost_us"] if m else "-", "%.1f" % m["stall_us"] if m else "-", mw, mc))
        fw, fh = r0["forward_us"], r0["forward_host_us"]
        print("forward device time: join=wait %.1f us, join=call %.1f us (host time to queue it: %.1f / %.1f us; "
              "the GPU was still busy when the host finished in %.0f%% of forwards); predicted stall total: "
              "model %.1f us%s" % (fw["wait"], fw["call"], fh["wait"], fh["call"],
                                   100.0 * (r0.get("host_ahead_fraction") or 0.0), pred["analytical"]["stall_us"],
                                   ", table %.1f us" % pred["measured"]["stall_us"] if pred["measured"] else ""))
        print("outputs of the two modes bit-identical: %s; kept on c10d, a local stand-in here (not measured): %s"
              % (r0.get("outputs_equal"), ", ".join(r0.get("standins", []))))
        if "capture_equal" in r0:
            print("captured into a CUDA graph (join at wait_tensor) and replayed: output equal to eager: %s%s"
                  % (r0["capture_equal"], " (%s)" % r0["capture_error"] if r0.get("capture_error") else ""))
            if "replay_host_us" in r0:
                print("CUDA graph replay: host time to queue the forward %.1f us, device time %.1f us (medians of 40)"
                      % (r0["replay_host_us"], r0["replay_device_us"]))
        hvd = r0.get("host_vs_device") or {}
        cal = r0.get("calibration_us")
        if cal:
            print("single operations in rank 0, host us per call: %s"
                  % ", ".join("%s %.1f" % kv for kv in cal.items()))
        if hvd:
            print("the forward without instrumentation, join at wait_tensor, medians of %d forwards:" % args.iters)
            print("%-38s | %9s %9s %6s | %s" % ("run as", "host us", "device us", "ratio", "host split, us per forward"))
            for name, row in hvd.items():
                if "error" in row:
                    print("%-38s | failed: %s" % (name, row["error"][:300]))
                    continue
                sp = row["split_us"]
                print("%-38s | %9.1f %9.1f %6.2f | %s (vs eager: max abs %.3g)" % (
                    name, row["host_us"], row["device_us"], row["ratio"] or 0.0,
                    ", ".join("%s %.1f" % (k, v) for k, v in sp.items()), row["max_abs_vs_eager"]))
            if "replay_host_us" in r0:
                print("%-38s | %9.1f %9.1f %6.2f |" % ("CUDA graph replay", r0["replay_host_us"], r0["replay_device_us"],
                                                       r0["replay_host_us"] / r0["replay_device_us"]))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
