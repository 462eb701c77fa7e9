#!/usr/bin/env python3
"""Loading a torchtitan SimpleFSDP region, lowering included, side by side
with json.loads of the same region's JSON, in one process and one run.

    python3 bench/bench_titan_load.py [--fixture fixtures/titan/bf16_v1001_w4.json]
                                      [--rank 1] [--world 4] [--iters 300] [--rounds 5]

The fixture (torchtitan 0.3.0's Llama3, 18 DTensor weight gathers) is saved
as an artifact once (outside the clock). Each round then times, interleaved,
the median of --iters calls of:

  json.loads        json.loads of the JSON text (what a Python reader pays
                    before it has even a dict)
  C loader          magi_loader_load of the artifact through ctypes: verify,
                    decode, fingerprint, lower the 18 redistributes for this
                    rank (copy-engine, cast and pad at bind), plan, rewrite
  C loader, no rank the same without a rank and world (nothing lowered: the
                    cost of the lowering is the difference)
  Python load       magi_aot.load(..., rank=, world=): the C loader plus the
                    Region the package hands a user (document, reports)

Each column is the median of the rounds' medians. The library is the one
MAGI_AOT_LIB names (or the package finds).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def median_us(fn, iters):
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", default=os.path.join(ROOT, "fixtures", "titan", "bf16_v1001_w4.json"))
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    import magi_aot
    from magi_aot._lib import LOAD_TRANSPORTS, CRegion, LoadedInfo, LoaderOptions, lib
    text = open(args.fixture).read()
    with tempfile.TemporaryDirectory() as d:
        art = os.path.join(d, "titan.magi")
        with CRegion.from_json_text(text) as r:
            data = r.encode(0)
        with open(art, "wb") as f:
            f.write(data)
        path = ctypes.c_char_p(art.encode())
        arr = (ctypes.c_char_p * 1)(path)

        def loader(rank, world):
            opts = LoaderOptions(transport=LOAD_TRANSPORTS["copy_engine"])
            if world:
                opts.bind.rank, opts.bind.world = rank, world
            ld = ctypes.c_void_p()
            lib.magi_loader_new(ctypes.byref(ld), ctypes.byref(opts))
            return ld, arr

        lowered, plain = loader(args.rank, args.world), loader(0, 0)
        info = LoadedInfo()
        lib.magi_loader_load(lowered[0], lowered[1], 1)
        lib.magi_loader_info(ctypes.byref(info), lowered[0], 0)
        n_lowered = info.n_lowered
        region = magi_aot.load(art, transport="copy_engine", rank=args.rank, world=args.world)
        n_rewritten = region.n_rewritten

        cols = {"json.loads": lambda: json.loads(text),
                "C loader": lambda: lib.magi_loader_load(lowered[0], lowered[1], 1),
                "C loader, no rank": lambda: lib.magi_loader_load(plain[0], plain[1], 1),
                "Python load": lambda: magi_aot.load(art, transport="copy_engine", rank=args.rank,
                                                      world=args.world)}
        res = {k: [] for k in cols}
        for _ in range(args.rounds):
            for k, fn in cols.items():
                res[k].append(median_us(fn, args.iters))
        for ld in (lowered[0], plain[0]):
            lib.magi_loader_free(ld)
    print("fixture %s (%d bytes of JSON, artifact %d bytes): %d redistributes lowered, %d gathers rewritten "
          "(rank %d of %d)" % (os.path.basename(args.fixture), len(text), len(data), n_lowered, n_rewritten,
                               args.rank, args.world))
    base = statistics.median(res["json.loads"])
    print("%-20s %12s %12s" % ("path", "median us", "json.loads/x"))
    for k, v in res.items():
        m = statistics.median(v)
        print("%-20s %12.1f %12.2f" % (k, m, base / m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
