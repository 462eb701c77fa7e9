#!/usr/bin/env python3
"""torchtitan's SimpleFSDP end to end: saved by the save backend, loaded in
fresh rank processes with the copy-engine transport, run from the artifact.

    python3 python/tests/titan_e2e.py --out DIR --world 2 --vocab 1001 --mp bf16 [--keep-cast-pad]

1. save: `world` gloo rank processes build torchtitan's Llama3 at a tiny size
   wrapped by torchtitan's own data_parallel(..., "fully_shard", ...)
   (titan_model.py), compile it with magi_aot.save_backend and run one
   forward: the region lands in DIR/cache, each rank keeps the compiled
   model's output (DIR/rank<r>.compiled.pt).
2. run: `world` fresh rank processes load the region from the cache with
   transport="copy_engine", put it in a SymmRuntime on the host backend (the
   loader lowers every redistribute for the rank, with the cast and pad at
   bind unless --keep-cast-pad), bind the rank's own shards, run the rebuilt
   graph and compare: bit-exact with the compiled original; in fp32 also
   bit-exact with the unsharded model.

Every rank writes DIR/rank<r>.json; the driver prints one line per rank and
a verdict and exits non-zero when a check failed.
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


def _save(args, rank):
    import torch
    import titan_model as tm
    import magi_aot
    tm.init_gloo(rank, args.world, os.path.join(args.out, "store.save"))
    model, inputs = tm.build(args.world, rank, vocab=args.vocab, mp=args.mp, attn=args.attn)
    be = magi_aot.save_backend(os.path.join(args.out, "cache"), "titan", strict=True)
    compiled = torch.compile(model, backend=be, fullgraph=True)
    with torch.no_grad():
        out = compiled(*inputs)
    torch.save(out, os.path.join(args.out, "rank%d.compiled.pt" % rank))
    keys = [e.key for e in be.entries]
    return {"ok": bool(keys), "keys": keys}


def _run(args, rank):
    import torch
    import titan_model as tm
    import magi_aot
    from magi_aot.backend import cache_get
    from magi_aot.runtime import SymmRuntime
    tm.init_gloo(rank, args.world, os.path.join(args.out, "store.run"))
    with open(os.path.join(args.out, "rank0.save.json")) as f:
        key = json.load(f)["keys"][0]
    t0 = time.perf_counter()
    # one load, rank-local, for this rank: the runtime binds it as it stands
    region = cache_get(os.path.join(args.out, "cache"), key, transport="copy_engine", rank=rank,
                       world=args.world, keep_cast_pad=args.keep_cast_pad)
    rt = SymmRuntime([region], device="cpu", keep_cast_pad=args.keep_cast_pad)
    if not rt.plan.adopted or rt.regions[0] is not region:
        raise AssertionError("the runtime loaded the region a second time")
    t_load = time.perf_counter() - t0
    model, inputs = tm.build(args.world, rank, vocab=args.vocab, mp=args.mp, attn=args.attn)
    shards = dict(model.named_parameters())
    shards.update(model.named_buffers())
    t0 = time.perf_counter()
    rt.bind(shards, strict=True)
    rt.ready()
    t_bind = time.perf_counter() - t0
    loaded = rt.regions[0]
    gm = rt.graph_module(region)
    values = {p["name"]: v for p, v in zip([p for p in loaded.placeholders if "tokens" in p["name"]], inputs)}
    with torch.no_grad():
        out = gm(*rt.args(region, values))
    out = out[0] if isinstance(out, (tuple, list)) else out
    want = torch.load(os.path.join(args.out, "rank%d.compiled.pt" % rank))
    res = {"load_s": t_load, "bind_s": t_bind, "plan_sha256": rt.plan_sha256,
           "lowered": sum(e["lowered"] for e in loaded.redistributes),
           "redistributes": len(loaded.redistributes),
           "at_bind": sum(bool(e.get("at_bind")) for e in loaded.redistributes),
           "rewritten": sum(g["reason"] == "rewritten" for g in loaded.rewrite_report),
           "gathers": len(loaded.rewrite_report),
           "kept": sorted({g["reason"] for g in loaded.rewrite_report if g["reason"] != "rewritten"}),
           "bit_exact_compiled": bool(torch.equal(out, want)),
           "max_abs_compiled": float((out.float() - want.float()).abs().max())}
    if args.mp == "fp32":
        ref, rin = tm.build_reference(args.vocab, mp="fp32", attn=args.attn)
        with torch.no_grad():
            r = ref(*rin)
        res["bit_exact_unsharded"] = bool(torch.equal(out, r))
        res["max_abs_unsharded"] = float((out - r).abs().max())
    ok = res["bit_exact_compiled"] and res.get("bit_exact_unsharded", True)
    ok = ok and res["lowered"] == res["redistributes"]
    if args.keep_cast_pad:
        ok = ok and (res["at_bind"] == 0)
    else:
        ok = ok and res["rewritten"] == res["gathers"]
    res["ok"] = ok
    rt.close()
    return res


def _rank_main(args):
    rank = int(os.environ["RANK"])
    phase = args.phase
    try:
        res = (_save if phase == "save" else _run)(args, rank)
    except Exception as e:  # noqa: BLE001 - reported by the driver
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}
    with open(os.path.join(args.out, "rank%d.%s.json" % (rank, phase)), "w") as f:
        json.dump(res, f, indent=1)
    return 0 if res.get("ok") else 1


def _launch(args, phase):
    procs = []
    for r in range(args.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.world))
        cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--out", args.out,
               "--world", str(args.world), "--vocab", str(args.vocab), "--mp", args.mp, "--attn", args.attn]
        if args.keep_cast_pad:
            cmd.append("--keep-cast-pad")
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    results = []
    for r in range(args.world):
        path = os.path.join(args.out, "rank%d.%s.json" % (r, phase))
        res = json.load(open(path)) if os.path.exists(path) else {"ok": False, "error": "no result",
                                                                    "log": logs[r][-2000:]}
        results.append(res)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", choices=["save", "run"], help=argparse.SUPPRESS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--mp", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--attn", choices=["sdpa", "flex"], default="sdpa")
    ap.add_argument("--keep-cast-pad", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    if args.phase:
        return _rank_main(args)
    os.makedirs(args.out, exist_ok=True)
    for phase in ("save", "run"):
        res = _launch(args, phase)
        bad = [r for r in res if not r.get("ok")]
        for r, x in enumerate(res):
            brief = {k: v for k, v in x.items() if k not in ("trace", "log", "plan_sha256")}
            print("titan_e2e %s rank %d: %s" % (phase, r, json.dumps(brief)))
        if bad:
            for x in bad:
                print(x.get("trace") or x.get("log") or "")
            print("titan_e2e: FAIL in %s" % phase)
            return 1
    plans = {x["plan_sha256"] for x in res}
    if len(plans) != 1:
        print("titan_e2e: FAIL: the ranks' plans differ")
        return 1
    print("titan_e2e: PASS (world %d, vocab %d, %s, %s%s)" % (args.world, args.vocab, args.mp, args.attn,
                                                          ", cast and pad kept" if args.keep_cast_pad else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
