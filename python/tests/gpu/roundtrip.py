#!/usr/bin/env python3
"""H200 round trip of real models through magi_aot (run by gpu/run.sh).

  roundtrip.py save DIR   trace the models with torch.compile + the magi_aot
                          save backend (cache DIR/cache), also save each
                          region to DIR/<tag>.magi, and record what Dynamo's
                          own FakeTensors say (DIR/expect.json)
  roundtrip.py load DIR   in a fresh process: load every region from the
                          cache and from its file, rebuild FakeTensors, compare
                          with expect.json, compare fingerprints (file, cache,
                          and a re-trace in this process), check the FSDP
                          copy-engine report; time the loads (DIR/results.json)

Models: a transformer block (dynamic batch and sequence), a 24-layer stack
of them, a SimpleFSDP-style block (DTensor weights, funcol gathers on two
process groups of a fake process group) and a graph with unbacked symbols.
"""
import json
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(os.path.dirname(HERE)))]

import torch  # noqa: E402

import magi_aot  # noqa: E402
import torchcheck as tc  # noqa: E402
from magi_aot.cache import cache_get  # noqa: E402

DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch._dynamo.config.capture_scalar_outputs = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True


def build(tag):
    """(model, args, dynamic dims) of each model."""
    torch.manual_seed(0)
    if tag == "block":
        m = tc.Block(1024, 8, 4096).to(DEV, torch.bfloat16)
        x = torch.randn(2, 384, 1024, device=DEV, dtype=torch.bfloat16)
        return m, (x,), [(x, 0), (x, 1)]
    if tag == "stack24":
        m = tc.Stack(24, 512, 8, 2048).to(DEV, torch.bfloat16)
        x = torch.randn(2, 256, 512, device=DEV, dtype=torch.bfloat16)
        return m, (x,), [(x, 1)]
    if tag == "fsdp_block":
        world, sub = tc.fsdp_setup(4)
        m = tc.FSDPBlock(world, sub, DEV)
        x = torch.randn(2, 128, 1024, device=DEV, dtype=torch.bfloat16)
        return m, (x,), [(x, 1)]
    if tag == "unbacked":
        x = torch.randn(64, 128, device=DEV)
        splits = torch.tensor([16, 8, 24, 16], device="cpu")
        return tc.Unbacked(), (x, splits), [(x, 0)]
    raise KeyError(tag)


TAGS = ["block", "stack24", "fsdp_block", "unbacked"]


def trace(tag, backend=None):
    torch._dynamo.reset()
    m, args, dyn = build(tag)
    for t, d in dyn:
        torch._dynamo.mark_dynamic(t, d)
    cap = tc.Capture(backend)
    t0 = time.perf_counter()
    run_error = None
    try:
        with torch.no_grad():
            torch.compile(m, backend=cap)(*args)
    except Exception as e:  # the region was handed over before running
        run_error = "%s: %s" % (type(e).__name__, str(e)[:300])
    if DEV.type == "cuda":
        torch.cuda.synchronize()
    return cap.gms, time.perf_counter() - t0, run_error


def save(d):
    os.makedirs(d, exist_ok=True)
    cache = os.path.join(d, "cache")
    expect = {"torch": torch.__version__, "device": str(DEV),
              "gpu": torch.cuda.get_device_name() if DEV.type == "cuda" else None, "models": {}}
    for tag in TAGS:
        print("== save", tag, flush=True)
        backend = magi_aot.save_backend(cache, tag, compile_config={"dynamic": True})
        try:
            gms, secs, run_error = trace(tag, backend)
        except Exception:
            traceback.print_exc()
            expect["models"][tag] = {"error": traceback.format_exc()[-2000:]}
            continue
        rec = {"trace_seconds": secs, "run_error": run_error, "regions": []}
        for gm, ent in zip(gms, backend.entries):
            r = {"entry": ent.as_dict()}
            try:
                r["expect"] = tc.describe_gm(gm)
                if ent.error is None:
                    r["fp_gm"] = magi_aot.fingerprint(gm)
                    path = os.path.join(d, "%s_%d.magi" % (tag, ent.model_idx))
                    t0 = time.perf_counter()
                    info = magi_aot.save(gm, path, model_tag=tag, model_idx=ent.model_idx)
                    r["save_file_seconds"] = time.perf_counter() - t0
                    r["file"], r["fp_file"] = path, info["fingerprint"]
                    if tag == "stack24":  # the backend's save path, repeated
                        times = []
                        for _ in range(5):
                            t0 = time.perf_counter()
                            backend.save_region(gm, ent.model_idx)
                            times.append(time.perf_counter() - t0)
                        r["save_region_seconds_repeat"] = times
            except Exception:
                traceback.print_exc()
                r["entry"]["error"] = "save phase: " + traceback.format_exc()[-1500:]
            rec["regions"].append(r)
            print("  region %d: %s nodes, %s bytes, walk %.1f ms, save %.1f ms, key %s, error %s"
                  % (ent.model_idx, ent.nodes, ent.bytes, 1e3 * (ent.walk_seconds or 0),
                     1e3 * (ent.save_seconds or 0), (ent.key or "")[:16], ent.error), flush=True)
        print("  trace %.1f s, %d region(s), run: %s" % (secs, len(gms), run_error or "ok"), flush=True)
        expect["models"][tag] = rec
    with open(os.path.join(d, "expect.json"), "w") as f:
        json.dump(expect, f, indent=1)


def load(d):
    with open(os.path.join(d, "expect.json")) as f:
        expect = json.load(f)
    cache = os.path.join(d, "cache")
    results, failures, passes = {}, [], []

    def check(name, ok, detail=""):
        print("CHECK %-55s %s %s" % (name, "PASS" if ok else "FAIL", detail if not ok else ""),
              flush=True)
        (passes if ok else failures).append(name)

    for tag in TAGS:
        rec = expect["models"].get(tag, {})
        if "error" in rec or not rec.get("regions"):
            check(tag + ": traced and saved", False, rec.get("error", "no region"))
            continue
        check(tag + ": one region, saved without error",
              len(rec["regions"]) == 1 and rec["regions"][0]["entry"]["error"] is None,
              json.dumps([r["entry"] for r in rec["regions"]])[:500])
        res = results[tag] = {}
        for reg in rec["regions"]:
            ent = reg["entry"]
            if ent["error"] is not None:
                continue
            t0 = time.perf_counter()
            r = cache_get(cache, ent["key"], transport="copy_engine")
            res["cache_get_seconds"] = time.perf_counter() - t0
            rf = magi_aot.load(reg["file"])
            check(tag + ": fingerprint equal (gm, file, cache, backend)",
                  len({reg["fp_gm"], reg["fp_file"], ent["fingerprint"], r.fingerprint,
                       rf.fingerprint}) == 1,
                  str([reg["fp_gm"], reg["fp_file"], ent["fingerprint"], r.fingerprint]))
            t0 = time.perf_counter()
            fakes = r.fake_inputs()
            res["fake_inputs_seconds"] = time.perf_counter() - t0
            probs = tc.compare(reg["expect"], r, fakes)
            check(tag + ": FakeTensors equal Dynamo's metadata (%d inputs)" % len(fakes),
                  not probs, "; ".join(probs[:8]))
            res["symbols"] = r.symbols
            res["symbol_map"] = {k: str(v) for k, v in (r.symbol_map or {}).items()}
            res["n_placeholders"] = len(fakes)
            res["nodes"] = len(r.nodes)
            if tag == "fsdp_block":
                probs = tc.check_fsdp_report(r)
                check(tag + ": copy-engine rewrites exactly the eligible gathers", not probs,
                      "; ".join(probs))
                res["rewrite_report"] = [{k: g[k] for k in ("name", "from", "to", "reason", "detail")}
                                         for g in r.rewrite_report]
                res["sources"] = {k: list(v) if isinstance(v, tuple) else v
                                  for k, v in tc.gather_sources(r).items()}
                res["bind_report"] = r.bind_report
            try:
                probs, n_out = tc.run_rebuilt(magi_aot.load(reg["file"], transport=None))
                check(tag + ": graph rebuilt from the artifact runs on its fake inputs",
                      not probs and n_out > 0, "; ".join(probs[:6]) or "no output checked")
                res["rebuilt_outputs_checked"] = n_out
            except magi_aot.MagiError as e:
                ok = tag == "fsdp_block" and e.status == "MAGI_ERR_UNSUPPORTED"
                check(tag + ": graph rebuild " + ("refused as documented" if ok else "failed"),
                      ok, str(e))
                res["rebuild"] = str(e)
                if ok:  # the rank-local form rebuilds and runs
                    from magi_aot.fx.rebuild import localize
                    probs, n_out = tc.run_rebuilt(localize(magi_aot.load(reg["file"], transport=None)))
                    check(tag + ": rank-local graph rebuilt from the artifact runs on its fake inputs",
                          not probs and n_out > 0, "; ".join(probs[:6]) or "no output checked")
            except Exception:
                check(tag + ": graph rebuilt from the artifact runs", False,
                      traceback.format_exc()[-1200:])
            if tag == "unbacked":
                ub = [k for k, v in r.symbols.items() if v is None]
                check(tag + ": unbacked symbols carried (hint null)", len(ub) >= 4, str(r.symbols))
            if tag == "stack24":
                times = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    magi_aot.load(reg["file"], transport="copy_engine")
                    times.append(time.perf_counter() - t0)
                res["load_file_seconds"] = times
                times = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    magi_aot.load(reg["file"], transport=None)
                    times.append(time.perf_counter() - t0)
                res["load_file_no_symm_seconds"] = times
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    magi_aot.load(reg["file"], transport=None).fake_inputs()
                    times.append(time.perf_counter() - t0)
                res["load_plus_fake_seconds"] = times
                res["save_seconds_backend_first"] = ent["save_seconds"]
                res["walk_seconds_backend_first"] = ent["walk_seconds"]
                res["save_region_seconds_repeat"] = reg.get("save_region_seconds_repeat")
                res["artifact_bytes"] = ent["bytes"]
        if tag != "stack24":  # a re-trace here gives the same fingerprint
            try:
                gms, _, _ = trace(tag)
                fp = magi_aot.fingerprint(gms[0])
                check(tag + ": re-trace in this process, same fingerprint",
                      fp == rec["regions"][0]["fp_gm"], "%s vs %s" % (fp, rec["regions"][0]["fp_gm"]))
            except Exception:
                check(tag + ": re-trace in this process", False, traceback.format_exc()[-800:])
    results["failures"] = failures
    results["torch"] = torch.__version__
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    st = results.get("stack24", {})
    if st.get("load_file_seconds"):
        med = statistics.median
        print("BENCH stack24: %d nodes, %d placeholders, artifact %s bytes"
              % (st["nodes"], st["n_placeholders"], st["artifact_bytes"]))
        print("BENCH stack24 save via backend (walk+check+encode+fingerprint+cache put): first %.1f ms"
              " (walk %.1f ms), repeat median %.1f ms"
              % (1e3 * st["save_seconds_backend_first"], 1e3 * st["walk_seconds_backend_first"],
                 1e3 * med(st["save_region_seconds_repeat"] or [0])))
        print("BENCH stack24 load through Python: median %.2f ms (min %.2f) with copy-engine plan;"
              " %.2f ms without; load+fake_inputs %.1f ms; cache_get %.2f ms"
              % (1e3 * med(st["load_file_seconds"]), 1e3 * min(st["load_file_seconds"]),
                 1e3 * med(st["load_file_no_symm_seconds"]), 1e3 * med(st["load_plus_fake_seconds"]),
                 1e3 * st["cache_get_seconds"]))
    print("roundtrip: %d passed, %d failed" % (len(passes), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("save", "load"):
        sys.exit(__doc__)
    if sys.argv[1] == "save":
        save(sys.argv[2])
    else:
        sys.exit(load(sys.argv[2]))
