#!/usr/bin/env python3
"""Warm start from the magi cache vs torch's own paths, one GPU, fresh processes.

    python3 python/tests/gpu/warmstart.py --out DIR [--anchor PATH] [--skip-anchor]
    (dry run of the magi side on CPU with tiny configs:
     --device cpu --tiny --skip-anchor --only magi-save,magi-warm,magi-flip)

Runs, each in a fresh process and in this order:
  torch anchor (shared/anchors/warmstart_torch.py): eager, cold, warm,
      mega-save, mega-load - torch.compile of the 8-layer Llama-style model;
  magi-save   the same model traced once by torch.compile with the magi save
              backend (compiled code stored in the artifact);
  magi-warm   Model(cfg) + magi_aot.warm_start(model, cache): loads the
              stored code - counts Dynamo graphs and Inductor code
              generations (must be 0) and checks the output against eager;
  magi-warm2  the same again (a second process sharing the cache);
  magi-sim    a simulated other GPU architecture in the key: compiles from
              the stored graph and says which key differed;
  magi-flip   a flipped byte in the stored compiled section: refused before
              anything is unpickled or loaded;
  moe-save / moe-warm   a tiny transformers Mixtral (MoE), same protocol.
Each process prints one JSON line; the table goes to DIR/warmstart.json and
DIR/warmstart.md. Needs MAGI_AOT_LIB (python/tests/gpu/run.sh builds it).
"""
import argparse
import json
import os
import subprocess
import sys
import time

T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SEQ = 128
DEVICE = os.environ.get("MAGI_WARMSTART_DEVICE", "cuda")
TINY = os.environ.get("MAGI_WARMSTART_TINY") == "1"


def _sync():
    import torch
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _model(kind):
    import torch
    import transformers as tf
    torch.manual_seed(0)
    if kind == "llama" and TINY:
        cfg = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=512)
        vocab = 256
        m = tf.LlamaForCausalLM(cfg)
    elif kind == "llama":
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                             num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                             max_position_embeddings=2048)
        vocab = 32000
        m = tf.LlamaForCausalLM(cfg)
    else:
        cfg = tf.MixtralConfig(vocab_size=1024, hidden_size=256, intermediate_size=512,
                               num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                               num_local_experts=4, num_experts_per_tok=2,
                               max_position_embeddings=512)
        vocab = 1024
        m = tf.MixtralForCausalLM(cfg)
    m.config.use_cache = False
    # The MoE runs in float32: in bfloat16 its top-2 expert choice flips on
    # near-ties between eager and compiled kernels (differences up to 0.4 in
    # the logits of a random tiny model, compiled-vs-compiled outputs equal),
    # so an eager check could not tell a wrong load from a tie broken the
    # other way. MAGI_WARMSTART_MOE_DTYPE=bfloat16 shows it.
    dtype = torch.bfloat16
    if kind == "moe":
        dtype = getattr(torch, os.environ.get("MAGI_WARMSTART_MOE_DTYPE", "float32"))
    m = m.to(DEVICE, dtype).eval()
    ids = torch.randint(0, vocab, (2, SEQ), device=DEVICE)
    torch._dynamo.mark_dynamic(ids, 1)
    return m, ids


class _Counts:
    """Dynamo graphs and Inductor code generations in this process."""

    def __init__(self):
        import torch._inductor.graph as g
        self.codegen = 0
        orig = g.GraphLowering.compile_to_module

        def wrapped(*a, **k):
            self.codegen += 1
            return orig(*a, **k)
        g.GraphLowering.compile_to_module = wrapped

    def as_dict(self):
        from torch._dynamo.utils import counters
        return {"dynamo_graphs": counters["stats"]["unique_graphs"],
                "inductor_codegen": self.codegen}


def _logits(out):
    return out[0] if isinstance(out, (tuple, list)) else out.logits


def worker(mode, root):
    kind = "moe" if mode.startswith("moe") else "llama"
    cache = os.path.join(root, "magi-cache-" + kind)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "ind-" + mode)  # fresh, unshared
    if mode == "magi-sim":
        os.environ["MAGI_AOT_SIMULATE_KEY"] = "device=%s:simulated" % DEVICE
    import shutil
    shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
    t = time.perf_counter()
    import torch
    import transformers  # noqa: F401
    import magi_aot
    t_import = time.perf_counter() - t
    counts = _Counts()
    m, ids = _model(kind)
    res = {"mode": mode, "import_s": round(t_import, 2)}
    if mode == "magi-flip":
        return flip(cache, res)
    tag = "warmstart-" + kind
    prof = None
    if os.environ.get("MAGI_WARMSTART_PROFILE") == "1" and mode != "magi-save":
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t = time.perf_counter()
    with torch.no_grad():
        fwd = magi_aot.warm_start(m, cache, tag, dynamic=None)
        out = _logits(fwd(ids))
        _sync()
    res["first_call_s"] = round(time.perf_counter() - t, 3)
    if prof is not None:  # where the first call's time goes, by cumulative time
        import io
        import pstats
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(60)
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(40)
        with open(os.path.join(root, "profile-%s.txt" % mode), "w") as f:
            f.write(buf.getvalue())
    rep = dict(fwd.report)
    rep.pop("header", None)
    res["served"] = rep.get("served")
    res["reason"] = rep.get("reason")
    res["timings"] = {k: (round(v, 3) if isinstance(v, float) else v)
                      for k, v in (rep.get("timings") or {}).items()}
    res.update(counts.as_dict())
    with torch.no_grad():
        ref = _logits(m(ids))
        t = time.perf_counter()
        for _ in range(10):
            fwd(ids)
        _sync()
        res["step_ms"] = round((time.perf_counter() - t) / 10 * 1e3, 3)
        t = time.perf_counter()
        for _ in range(10):
            m(ids)
        _sync()
        res["eager_step_ms"] = round((time.perf_counter() - t) / 10 * 1e3, 3)
        other = torch.randint(0, ref.shape[-1], (2, SEQ + 37), device=DEVICE)
        res["other_seq_ok"] = bool(torch.allclose(_logits(fwd(other)).float(),
                                                  _logits(m(other)).float(), atol=0.1, rtol=0.05))
    diff = (out.float() - ref.float()).abs().max().item()
    res["max_abs_vs_eager"] = round(diff, 4)
    res["correct"] = bool(torch.allclose(out.float(), ref.float(), atol=0.1, rtol=0.05))
    res["total_s"] = round(time.perf_counter() - T0, 2)
    return res


def flip(cache, res):
    """Flip one byte inside the stored compiled section of the cached entry:
    the region load must refuse it, and nothing may be unpickled."""
    import pickle
    from magi_aot.cache import cache_get_bytes, read_index
    from magi_aot._lib import MagiError, read_opaque_sections
    import magi_aot
    idx = read_index(cache, "warmstart-llama")
    data = bytearray(cache_get_bytes(cache, idx["regions"][0]["key"]))
    data[len(data) - 4096] ^= 0x10     # inside the last section: the compiled code
    calls = []
    real_loads = pickle.loads
    pickle.loads = lambda *a, **k: calls.append(1) or real_loads(*a, **k)
    errors = []
    for what, f in (("load_bytes", lambda: magi_aot.load_bytes(bytes(data))),
                    ("read_opaque_sections", lambda: read_opaque_sections(bytes(data)))):
        try:
            f()
            errors.append("%s: accepted" % what)
        except MagiError as e:
            errors.append("%s: %s" % (what, e.status))
    pickle.loads = real_loads
    res["refused"] = all("MAGI_ERR_DIGEST" in e for e in errors)
    res["errors"] = errors
    res["unpickled"] = len(calls)
    return res


def run(cmd, timeout=300):
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"cmd": " ".join(cmd[-2:]), "error": "timeout after %ds" % timeout}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"cmd": " ".join(cmd[-2:]), "error": "rc %d: %s" % (p.returncode, p.stderr[-1500:])}
    r = json.loads(lines[-1])
    r["process_wall_s"] = round(time.perf_counter() - t, 2)
    return r


def table(rows):
    cols = ["mode", "served", "first_call_s", "step_ms", "dynamo_graphs", "inductor_codegen",
            "correct", "process_wall_s", "reason"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(c, r.get("error", "")) if c == "reason" else
                                         r.get(c, "")) for c in cols) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/magi-warmstart")
    ap.add_argument("--anchor", default=None)
    ap.add_argument("--skip-anchor", action="store_true")
    ap.add_argument("--worker", default=None)
    ap.add_argument("--root", default=None)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", default=None, help="comma-separated magi modes")
    a = ap.parse_args()
    os.environ["MAGI_WARMSTART_DEVICE"] = a.device
    if a.tiny:
        os.environ["MAGI_WARMSTART_TINY"] = "1"
    if a.worker:
        print(json.dumps(worker(a.worker, a.root)), flush=True)
        return 0
    os.makedirs(a.out, exist_ok=True)
    root = os.path.join(a.out, "work")
    import shutil
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    os.environ.setdefault("PYTHONPATH", os.path.join(ROOT, "python"))
    anchor = a.anchor
    if anchor is None:
        for c in (os.path.join(ROOT, "shared", "anchors", "warmstart_torch.py"),
                  os.path.join(ROOT, "..", "shared", "anchors", "warmstart_torch.py")):
            if os.path.exists(c):
                anchor = c
                break
    rows = []
    t_all = time.perf_counter()

    def note(r):
        rows.append(r)
        print(json.dumps(r), flush=True)
    if anchor and not a.skip_anchor:
        for mode in ("eager", "cold", "warm", "mega-save", "mega-load"):
            r = run([sys.executable, anchor, mode, os.path.join(root, "anchor")])
            r["mode"] = "torch-" + r.get("mode", mode)
            note(r)
    elif not a.skip_anchor:
        note({"mode": "torch-anchor", "error": "anchor script not found (--anchor PATH)"})
    me = [sys.executable, os.path.abspath(__file__), "--root", root, "--worker"]
    modes = ("magi-save", "magi-warm", "magi-warm2", "magi-sim", "magi-flip", "moe-save",
             "moe-warm")
    for mode in (a.only.split(",") if a.only else modes):
        r = run(me + [mode], timeout=300 if a.device == "cuda" else 1800)
        r.setdefault("mode", mode)
        note(r)
    by = {r["mode"]: r for r in rows}
    warm = by.get("magi-warm", {})
    summary = {
        "magi_first_call_s": warm.get("first_call_s"),
        "goal_first_call_le_1_5s": (warm.get("first_call_s") or 99) <= 1.5,
        "magi_warm_compiles": [warm.get("dynamo_graphs"), warm.get("inductor_codegen")],
        "moe_warm_compiles": [by.get("moe-warm", {}).get("dynamo_graphs"),
                              by.get("moe-warm", {}).get("inductor_codegen")],
        "torch_cold_s": by.get("torch-cold", {}).get("first_call_s"),
        "torch_warm_s": by.get("torch-warm", {}).get("first_call_s"),
        "torch_mega_load_s": (by.get("torch-mega-load", {}).get("first_call_s") or 0)
        + (by.get("torch-mega-load", {}).get("cache_load_s") or 0),
        "torch_compile_step_ms": by.get("torch-cold", {}).get("step_ms"),
        "magi_step_ms": warm.get("step_ms"),
        "wall_s": round(time.perf_counter() - t_all, 1),
    }
    with open(os.path.join(a.out, "warmstart.json"), "w") as f:
        json.dump({"rows": rows, "summary": summary}, f, indent=1)
    md = "# Warm start, one GPU, fresh processes\n\n" + table(rows) + "\n\n```\n" + \
        json.dumps(summary, indent=1) + "\n```\n"
    with open(os.path.join(a.out, "warmstart.md"), "w") as f:
        f.write(md)
    print(md)
    ok = (warm.get("served") == "stored" and warm.get("correct")
          and warm.get("dynamo_graphs") == 0 and warm.get("inductor_codegen") == 0
          and by.get("magi-flip", {}).get("refused"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
