"""The full model zoo on one GPU: torchvision CNNs, ViT, a segmentation and
a detection model, and transformers decoder-only (dense and mixture of
experts), encoder-only and encoder-decoder models, each built from a small
config with random weights (nothing downloaded).

Every region Dynamo hands the save backend is saved into a cache, then ONE
fresh process loads each region, rebuilds its GraphModule and fake inputs
and runs it: placeholders, outputs and fingerprint must equal what Dynamo
saw (tests/zoo.py). Prints one table row per region (save time, artifact
size, load time, pass/fail) and writes OUT/zoo.md and OUT/zoo.json.

    python3 python/tests/gpu/zoo.py --out OUT [--device cuda] [--models a,b,...]

Exit status 0 only when every region of every model passes. Needs torch
(2.11 or 2.13), torchvision and transformers; MAGI_AOT_LIB names the
library (see gpu/run.sh).
"""
import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import zoo  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default=",".join(zoo.MODELS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    args = ap.parse_args()
    import torch
    os.makedirs(args.out, exist_ok=True)
    cache = os.path.join(args.out, "cache")
    rows, compile_s, failed_models = [], {}, {}
    t_all = time.perf_counter()
    for name in args.models.split(","):
        try:
            got, secs = zoo.trace(name, cache, device=args.device, batch=args.batch, seq=args.seq)
            compile_s[name] = secs
            rows += got
            print("traced %-36s %2d region(s) in %6.1f s" % (name, len(got), secs), flush=True)
            if not got:
                failed_models[name] = "Dynamo handed over no region"
        except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end
            failed_models[name] = "%s: %s" % (type(e).__name__, str(e)[:400])
            traceback.print_exc()
    t_check = time.perf_counter()
    results = zoo.check_elsewhere(cache, rows, args.out) if rows else []
    check_s = time.perf_counter() - t_check
    by_key = {(r["model"], r["region"]): r for r in results}

    lines = ["| model | family | region | nodes | save (ms) | artifact (bytes) | load (ms) | result |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    n_pass = 0
    for row in rows:
        res = by_key.get((row["model"], row["region"]), {"problems": ["not checked"]})
        ok = not res["problems"]
        n_pass += ok
        verdict = "pass" if ok else "FAIL: " + "; ".join(res["problems"])[:300].replace("|", "/")
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
            row["model"], row["family"], row["region"], row["nodes"] or "-",
            "%.1f" % (row["save_seconds"] * 1e3) if row["save_seconds"] else "-",
            row["bytes"] or "-",
            "%.2f" % (res["load_seconds"] * 1e3) if res.get("load_seconds") else "-", verdict))
    for name, why in failed_models.items():
        lines.append("| %s | %s | - | - | - | - | - | FAIL: %s |" % (
            name, zoo.MODELS[name][0], why.replace("|", "/")))
    total = time.perf_counter() - t_all
    summary = ("%d/%d regions pass across %d models (%d model(s) failed before saving); "
               "torch %s on %s; trace+save %.1f s, fresh-process check %.1f s, total %.1f s"
               % (n_pass, len(rows), len(compile_s), len(failed_models), torch.__version__,
                  torch.cuda.get_device_name(0) if args.device.startswith("cuda")
                  and torch.cuda.is_available() else args.device,
                  sum(compile_s.values()), check_s, total))
    text = "\n".join(lines + ["", summary, ""])
    print(text)
    with open(os.path.join(args.out, "zoo.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "zoo.json"), "w") as f:
        json.dump({"rows": rows, "results": results, "failed_models": failed_models,
                   "compile_seconds": compile_s, "summary": summary}, f, indent=1)
    ok = n_pass == len(rows) and not failed_models and rows
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
