#!/usr/bin/env python3
"""Warm start, every path timed by the same code: time to the first output
of one model in a fresh process, side by side in one run.

    python3 bench/warmstart.py --out DIR [--runs 3] [--device cuda|cpu]
        [--size anchor|small] [--paths eager,magi,...] [--anchor PATH | --no-anchor]
        [--grad]

Paths (each run is a fresh interpreter started by this script):
  eager            the model's forward, no compile;
  magi             magi_aot.warm_start(model, cache, tag) over code stored by
                   the setup process magi-store (0 Dynamo graphs, 0 Inductor
                   code generations expected: counted);
  magi-standalone  the same stored code loaded with CompiledArtifact.load
                   (MAGI_AOT_DIRECT=0), the path before the directly loaded
                   module;
  compile-warm     torch.compile(model) with the Inductor cache that the setup
                   process compile-cold filled;
  mega-load        torch.compiler.load_cache_artifacts() of the bytes the setup
                   process mega-save wrote, into an empty Inductor cache, then
                   torch.compile(model);
  precompile-load  torch.compiler.load_compiled_function() of what the setup
                   process precompile-save wrote with
                   torch.compile(model.forward, fullgraph=True).aot_compile(...);
  aoti-load        AOTInductor: the package that aoti-save built
                   (torch.export + aoti_compile_and_package), loaded with
                   AOTIModelPackageLoader constructed directly (falls back to
                   aoti_load_package); the model's use_cache is off on
                   these two (an exported program cannot return
                   transformers' DynamicCache), static shapes.
Setup processes (magi-store, compile-cold, mega-save, precompile-save,
aoti-save) run once, before the timed runs, and are reported as rows too
(their time is a cold compile). A path that fails reports its error; the
others still run.

Two clocks per process, both ending when the first output is on the host
side of a device synchronisation:
  from_start_s  from the moment the parent stamped the time just before
                starting the child (interpreter start-up, every import,
                building the model and the path's own work included);
                proc_start_s is the same end measured from the child's
                process start as the kernel recorded it (/proc/self/stat,
                10 ms resolution);
  from_model_s  from the model built (weights on the device, inputs made)
                to the first output.
Every child runs with a bytecode cache (PYTHONPYCACHEPREFIX=DIR/pycache,
filled by the setup processes, which run first), as an installed package
has its bytecode after its first use: a Python environment that ships
without it (or PYTHONDONTWRITEBYTECODE=1) makes each process compile the
sources of every module it imports, 2.3 s of a warm start's profile on the
H200 host for Inductor's modules alone; --no-pyc-cache measures that.
Nothing heavy is imported before the child's clock starts: the Dynamo and
Inductor counters are installed by an import hook that patches Inductor's
code generation only when something else imports it.

The model: the 8-layer Llama-style transformers model of the torch anchor
(shared/anchors/warmstart_torch.py: hidden 1024, 16 heads, 4 KV heads,
vocab 32000, bf16, batch 2, sequence 128 marked dynamic) on CUDA when it
is available; `--size small` (2 layers, hidden 64, vocab 256, float32,
sequence 32) for CPU runs.

The anchor script itself runs beside (its modes eager, cold, warm,
mega-save, mega-load or those of --anchor-modes, each a fresh process; rows "anchor-*" with its own
clock, which starts after its interpreter is up and reports the time from
its torch.compile call to the first output) when a CUDA device is used
and the file exists (default ../shared/anchors/warmstart_torch.py beside
the repository, else shared/anchors/ inside it).

MAGI_BENCH_PROFILE=1 (or =PATH) profiles the children (cProfile from the
child's start: DIR/work/profile-PATH.txt; the profiler slows them, so the
clocks of a profiled run are not figures); with MAGI_BENCH_PROFILE_FROM=model
the profile covers only the span from the model built to the first output,
and with "steps" in it (model,steps) the steady steps are profiled too
(DIR/work/profile-PATH-steps.txt). The steady step is the mean of 20 steps
after 3 untimed ones.

Every path calls the model under torch.no_grad(), as the anchor does;
--grad calls it with grad enabled instead (the parameters require grad,
as after from_pretrained: the documentation's example as written), every
path alike, the setup processes included.

Prints a table (median and every run of both clocks), writes
DIR/warmstart.json and DIR/warmstart.md. Needs MAGI_AOT_LIB for the magi
rows (python/tests/gpu/run.sh warmstart builds it and runs this).
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

SPAWN_ENV = "MAGI_BENCH_SPAWN_T"
PROFILE_ENV = "MAGI_BENCH_PROFILE"   # "1" or a path name: cProfile that child, from its start
PROFILE_FROM_ENV = "MAGI_BENCH_PROFILE_FROM"   # "model": from the model built only; "steps": the steady steps too
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIMED = ("eager", "magi", "magi-standalone", "compile-warm", "mega-load", "precompile-load",
         "aoti-load")
SETUP = {"magi": "magi-store", "magi-standalone": "magi-store", "compile-warm": "compile-cold",
         "mega-load": "mega-save", "precompile-load": "precompile-save", "aoti-load": "aoti-save"}
LABEL = {
    "eager": "eager",
    "magi": "magi warm_start, stored code",
    "magi-standalone": "magi warm_start, stored code, CompiledArtifact.load (MAGI_AOT_DIRECT=0)",
    "compile-warm": "torch.compile, warm Inductor cache",
    "mega-load": "torch mega-cache (load_cache_artifacts + torch.compile)",
    "precompile-load": "torch AOT precompile (load_compiled_function)",
    "aoti-load": "AOTInductor package (AOTIModelPackageLoader; use_cache=False)",
    "magi-store": "setup: magi warm_start, trace + compile + store",
    "compile-cold": "setup: torch.compile, cold Inductor cache",
    "mega-save": "setup: torch.compile cold + save_cache_artifacts",
    "precompile-save": "setup: torch AOT precompile + save_compiled_function",
    "aoti-save": "setup: torch.export + aoti_compile_and_package",
}


# ------------------------------------------------------------------ child side
def _proc_start_epoch():
    """This process's start time (epoch seconds) from /proc/self/stat, or None."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])
        with open("/proc/stat") as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


class _Counts:
    """Inductor code generations and Dynamo graphs in this process, counted
    without importing Inductor: GraphLowering.compile_to_module is wrapped
    when (if) torch._inductor.graph gets imported."""

    def __init__(self):
        self.codegen = 0
        counts = self

        class Hook:
            def find_spec(self, name, path=None, target=None):
                if name != "torch._inductor.graph":
                    return None
                sys.meta_path.remove(self)
                import importlib.util
                spec = importlib.util.find_spec(name)
                orig = spec.loader.exec_module

                def exec_module(module):
                    orig(module)
                    lowering = module.GraphLowering
                    inner = lowering.compile_to_module

                    def wrapped(*a, **k):
                        counts.codegen += 1
                        return inner(*a, **k)
                    lowering.compile_to_module = wrapped
                spec.loader.exec_module = exec_module
                return spec
        sys.meta_path.insert(0, Hook())

    def as_dict(self):
        utils = sys.modules.get("torch._dynamo.utils")
        graphs = utils.counters["stats"]["unique_graphs"] if utils is not None else 0
        return {"dynamo_graphs": graphs, "inductor_codegen": self.codegen}


def _build(size, device):
    import torch
    import transformers as tf
    torch.manual_seed(0)
    if size == "anchor":
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                             num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                             max_position_embeddings=2048)
        dtype, seq = torch.bfloat16, 128
    else:
        cfg = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=256)
        dtype, seq = torch.float32, 32
    m = tf.LlamaForCausalLM(cfg).to(device, dtype).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, seq), device=device)
    return m, ids


def _logits(out):
    return out.logits if hasattr(out, "logits") else out[0]


def child(path, root, size, device, prof=None, grad=False):
    """One timed process of `path`. prof: a cProfile.Profile to enable over
    the span from the model built to the first output (PROFILE_FROM_ENV).
    grad: call the model with grad enabled (else under torch.no_grad())."""
    t_spawn = float(os.environ.get(SPAWN_ENV, "nan"))
    proc_start = _proc_start_epoch()
    counts = _Counts()
    ind = {"compile-cold": "ind-compile", "compile-warm": "ind-compile"}.get(path, "ind-" + path)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, ind)
    if path != "compile-warm":   # every other path starts with an empty Inductor cache
        import shutil
        shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
    import torch
    if path == "magi-standalone":
        os.environ["MAGI_AOT_DIRECT"] = "0"
    if path in ("magi", "magi-store", "magi-standalone"):
        import magi_aot
    m, ids = _build(size, device)
    if path not in ("aoti-save", "aoti-load", "precompile-save", "precompile-load"):
        torch._dynamo.mark_dynamic(ids, 1)
    if path in ("aoti-save", "aoti-load"):
        m.config.use_cache = False   # torch.export cannot return the DynamicCache
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    res = {"path": path}
    if prof is not None and "model" in os.environ.get(PROFILE_FROM_ENV, ""):
        prof.enable()
    t_model = time.time()
    with contextlib.nullcontext() if grad else torch.no_grad():
        fwd = None
        if path == "eager":
            fwd = m
        elif path in ("magi", "magi-store", "magi-standalone"):
            fwd = magi_aot.warm_start(m, os.path.join(root, "magi-cache"), "warmstart")
        elif path in ("compile-cold", "compile-warm"):
            fwd = torch.compile(m)
        elif path == "mega-save":
            fwd = torch.compile(m)
        elif path == "mega-load":
            with open(os.path.join(root, "mega.bin"), "rb") as f:
                torch.compiler.load_cache_artifacts(f.read())
            fwd = torch.compile(m)
        elif path == "precompile-save":
            aot = torch.compile(m.forward, fullgraph=True).aot_compile(((ids,), {}))
            aot.save_compiled_function(os.path.join(root, "precompiled.bin"))
            fwd = aot
        elif path == "precompile-load":
            with open(os.path.join(root, "precompiled.bin"), "rb") as f:
                fwd = torch.compiler.load_compiled_function(f)
        elif path == "aoti-save":
            ep = torch.export.export(m, (ids,))
            pkg = torch._inductor.aoti_compile_and_package(
                ep, package_path=os.path.join(root, "model.pt2"))
            fwd = torch._inductor.aoti_load_package(pkg)
        elif path == "aoti-load":
            pkg = os.path.join(root, "model.pt2")
            try:
                from torch._inductor.package.package import AOTICompiledModel
                fwd = AOTICompiledModel(torch._C._aoti.AOTIModelPackageLoader(
                    pkg, "model", False, 1, -1))
                res["aoti_loader"] = "AOTIModelPackageLoader"
            except Exception as e:  # noqa: BLE001 - another release's signature
                res["aoti_loader"] = "aoti_load_package (%s)" % type(e).__name__
                fwd = torch._inductor.aoti_load_package(pkg)
        else:
            raise SystemExit("unknown path %r" % path)
        out = _logits(fwd(ids))
        sync()
        t_first = time.time()
    if prof is not None and "model" in os.environ.get(PROFILE_FROM_ENV, ""):
        prof.disable()
    res["from_start_s"] = round(t_first - t_spawn, 3)
    res["proc_start_s"] = round(t_first - proc_start, 3) if proc_start else None
    res["from_model_s"] = round(t_first - t_model, 3)
    res["before_model_s"] = round(t_model - t_spawn, 3)
    res.update(counts.as_dict())
    if path == "mega-save":
        art = torch.compiler.save_cache_artifacts()
        if art is None:
            raise SystemExit("save_cache_artifacts returned nothing")
        with open(os.path.join(root, "mega.bin"), "wb") as f:
            f.write(art[0])
    if path in ("magi", "magi-store", "magi-standalone"):
        res["served"] = fwd.report.get("served")
        res["code_path"] = fwd.report.get("code_path")
        res["reason"] = fwd.report.get("reason")
        res["timings"] = {k: round(v, 4) if isinstance(v, float) else v
                          for k, v in (fwd.report.get("timings") or {}).items()}
    with torch.no_grad():
        ref = _logits(m(ids)).float()
        res["max_abs_vs_eager"] = round(float((out.detach().float() - ref).abs().max()), 4)
        res["grad_fn"] = type(out.grad_fn).__name__ if out.grad_fn is not None else None
        for _ in range(3):   # past any lazy first-call work
            fwd(ids)
        sync()
        steps = None
        if os.environ.get(PROFILE_ENV) in ("1", path) and "steps" in os.environ.get(PROFILE_FROM_ENV, ""):
            import cProfile
            steps = cProfile.Profile()
            steps.enable()
        t = time.perf_counter()
        for _ in range(20):
            fwd(ids)
        sync()
        res["step_ms"] = round((time.perf_counter() - t) / 20 * 1e3, 3)
        if steps is not None:
            steps.disable()
            _write_profile(steps, os.path.join(root, "profile-%s-steps.txt" % path),
                           (("tottime", 40),))
    return res


def _write_profile(prof, path, orders):
    """Append prof's tables to path, one per (sort key, rows) of orders."""
    import io
    import pstats
    buf = io.StringIO()
    for key, rows in orders:
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(rows)
    with open(path, "a") as f:
        f.write(buf.getvalue())


# ------------------------------------------------------------------ parent side
def _spawn(cmd, timeout, env=None):
    env = dict(os.environ if env is None else env)
    t = time.time()
    env[SPAWN_ENV] = repr(t)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timeout after %ds" % timeout}, time.time() - t
    wall = time.time() - t
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = [ln for ln in (p.stderr or p.stdout).strip().splitlines() if ln.strip()][-4:]
        return {"error": "rc %d: %s" % (p.returncode, (tail or ["(no output)"])[-1][-300:]),
                "error_context": "\n".join(tail[:-1])[-1200:]}, wall
    return json.loads(lines[-1]), wall


def _median(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return round(statistics.median(xs), 3) if xs else None


def _fmt(xs):
    med = _median(xs)
    if med is None:
        return "-"
    return "**%.2f s** (%s)" % (med, " / ".join("%.2f" % x for x in xs))


def table(groups, order):
    out = ["| path | runs | process start -> first output | model built -> first output | "
           "step | Dynamo graphs / Inductor codegen | max abs vs eager | served |",
           "|---|---|---|---|---|---|---|---|"]
    for p in order:
        rs = groups.get(p)
        if not rs:
            continue
        ok = [r for r in rs if "error" not in r]
        if not ok:
            out.append("| %s | %d | fails: %s | | | | | |" % (LABEL.get(p, p), len(rs),
                                                        rs[0]["error"][:200].replace("|", "/")))
            continue
        served = sorted({"%s/%s" % (r.get("served"), r.get("code_path")) for r in ok
                         if r.get("served")})
        out.append("| %s | %d | %s | %s | %s ms | %s | %s | %s |" % (
            LABEL.get(p, p), len(ok), _fmt([r["from_start_s"] for r in ok]),
            _fmt([r["from_model_s"] for r in ok]), _median([r.get("step_ms") for r in ok]),
            " ".join(sorted({"%s/%s" % (r.get("dynamo_graphs"), r.get("inductor_codegen"))
                             for r in ok})),
            max(r.get("max_abs_vs_eager", 0) for r in ok), ", ".join(served) or "-"))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/magi-warmstart")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default=None, choices=("cuda", "cpu"))
    ap.add_argument("--size", default=None, choices=("anchor", "small"))
    ap.add_argument("--paths", default=",".join(TIMED))
    ap.add_argument("--anchor", default=next(
        (c for c in (os.path.join(ROOT, "..", "shared", "anchors", "warmstart_torch.py"),
                     os.path.join(ROOT, "shared", "anchors", "warmstart_torch.py"))
         if os.path.exists(c)), os.path.join(ROOT, "..", "shared", "anchors",
                                             "warmstart_torch.py")))
    ap.add_argument("--no-anchor", action="store_true")
    ap.add_argument("--anchor-modes", default="eager,cold,warm,mega-save,mega-load",
                    help="the anchor's modes to run beside (warm needs cold before it)")
    ap.add_argument("--timeout", type=int, default=None, help="per process, seconds")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds: start no further process past this (the table is still "
                    "written, the runs left out are named)")
    ap.add_argument("--no-pyc-cache", action="store_true",
                    help="children compile every imported module's source (no bytecode cache)")
    ap.add_argument("--grad", action="store_true",
                    help="call the model with grad enabled (default: under torch.no_grad())")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        prof = None
        if os.environ.get(PROFILE_ENV) in ("1", a.child):
            import cProfile
            prof = cProfile.Profile()
            if "model" not in os.environ.get(PROFILE_FROM_ENV, ""):
                prof.enable()
        res = child(a.child, a.root, a.size, a.device, prof, a.grad)
        if prof is not None:   # by cumulative and own time
            prof.disable()
            _write_profile(prof, os.path.join(a.root, "profile-%s.txt" % a.child),
                           (("cumulative", 120), ("tottime", 40)))
        print(json.dumps(res), flush=True)
        return 0
    if a.device is None:
        probe = subprocess.run([sys.executable, "-c", "import torch;print(torch.cuda.is_available())"],
                               capture_output=True, text=True)
        a.device = "cuda" if probe.stdout.strip() == "True" else "cpu"
    if a.size is None:
        a.size = "anchor" if a.device == "cuda" else "small"
    timeout = a.timeout or (300 if a.device == "cuda" else 1200)
    paths = [p for p in a.paths.split(",") if p]
    bad = [p for p in paths if p not in TIMED]
    if bad:
        ap.error("unknown path(s) %s; known: %s" % (bad, ", ".join(TIMED)))
    os.makedirs(a.out, exist_ok=True)
    root = os.path.join(a.out, "work")
    import shutil
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    env = dict(os.environ)
    if not a.no_pyc_cache:   # bytecode as an installed package has it after its first use
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(a.out, "pycache")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    me = [sys.executable, os.path.abspath(__file__), "--root", root, "--size", a.size,
          "--device", a.device] + (["--grad"] if a.grad else []) + ["--child"]
    groups, t_all = {}, time.time()

    def over():
        return a.budget is not None and time.time() - t_all > a.budget

    def note(p, r, wall):
        r = dict(r, path=p, process_wall_s=round(wall, 2))
        groups.setdefault(p, []).append(r)
        print(json.dumps(r), flush=True)
    for p in paths:          # the setup processes, once each
        if p in SETUP and SETUP[p] not in groups:
            note(SETUP[p], *_spawn(me + [SETUP[p]], timeout, env))
    for _ in range(a.runs):  # the timed paths, round robin
        for p in paths:
            s = groups.get(SETUP.get(p), [{}])[0]
            if "error" in s:
                note(p, {"error": "setup %s failed: %s" % (SETUP[p], s["error"])}, 0.0)
                continue
            if over():
                note(p, {"error": "not run: past --budget %ss" % a.budget}, 0.0)
                continue
            note(p, *_spawn(me + [p], timeout, env))
    anchor_rows = []
    if a.device == "cuda" and not a.no_anchor and os.path.exists(a.anchor):
        adir = os.path.join(root, "anchor")
        for mode in [m for m in a.anchor_modes.split(",") if m]:
            if over():
                anchor_rows.append({"mode": "anchor-" + mode,
                                    "error": "not run: past --budget %ss" % a.budget})
                continue
            r, wall = _spawn([sys.executable, a.anchor, mode, adir], timeout, env)
            r = dict(r, mode="anchor-" + mode, process_wall_s=round(wall, 2))
            anchor_rows.append(r)
            print(json.dumps(r), flush=True)
    order = list(TIMED) + sorted(set(SETUP.values()), key=list(SETUP.values()).index)
    md = ["# Warm start: every path timed by the same code, fresh processes",
          "", "device %s, model %s, %s, %d runs per timed path (median, then each run)" %
          (a.device, a.size, "grad enabled" if a.grad else "under torch.no_grad()", a.runs),
          "", table(groups, order)]
    if anchor_rows:
        md += ["", "The anchor beside (its own clock: torch.compile call -> first output;"
               " process_wall_s: the whole process, its 10 steps included)", "",
               "| anchor mode | first_call_s | cache_load_s | step_ms | import_s | process_wall_s |",
               "|---|---|---|---|---|---|"]
        for r in anchor_rows:
            md.append("| %s | %s | %s | %s | %s | %s |" % (
                r["mode"], r.get("first_call_s", r.get("error", "")), r.get("cache_load_s", ""),
                r.get("step_ms", ""), r.get("import_s", ""), r.get("process_wall_s")))
    md = "\n".join(md) + "\n"
    summary = {p: {"from_start_median_s": _median([r.get("from_start_s") for r in rs]),
                   "from_model_median_s": _median([r.get("from_model_s") for r in rs])}
               for p, rs in groups.items()}
    with open(os.path.join(a.out, "warmstart.json"), "w") as f:
        json.dump({"device": a.device, "size": a.size, "runs": a.runs, "paths": groups,
                   "anchor": anchor_rows, "summary": summary,
                   "wall_s": round(time.time() - t_all, 1)}, f, indent=1)
    with open(os.path.join(a.out, "warmstart.md"), "w") as f:
        f.write(md)
    print(md)
    magi = [r for p in ("magi", "magi-standalone") for r in groups.get(p, []) if "error" not in r]
    if {"magi", "magi-standalone"} & set(paths) and not (magi and all(r.get("served") == "stored" and
                                             r.get("dynamo_graphs") == 0 and
                                             r.get("inductor_codegen") == 0 for r in magi)):
        print("magi rows: not served from stored code with 0 compiles", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
