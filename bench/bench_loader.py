#!/usr/bin/env python3
"""The loader against Python's json.loads, side by side in one run.

    python3 bench/bench_loader.py [--cli build/magi-aot] [--baseline OLD_CLI]
                                  [--rounds R] [--iters N] [JSON...]

For each magi-fx JSON fixture (default: stack24 and fsdp_block): save it as
an artifact v1 (magi-aot save), run `magi-aot bench loader` on it (the
library's loader, reused across loads as a runtime would, next to the
previous open + verify + load path), and time json.loads of the same JSON
text in this process, interleaved in the same minute. Prints the medians
and the ratio json.loads / loader (goal: the loader <= 250 us and >= 10x
faster than json.loads on stack24).

--baseline OLD_CLI: another build's CLI (say, of the commit before a
change) runs the same `bench loader`, alternating with --cli for --rounds
rounds (default 1, 3 with a baseline), so both see the same machine load;
each column is the median of the rounds' medians. Each CLI loads the
artifact it saved itself, so a change of the writer shows too (when the
writers agree the two files are the same bytes); their sizes are printed.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def json_loads_us(text, iters):
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        json.loads(text)
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def bench_cli(cli, art, iters):
    out = subprocess.run([cli, "bench", "loader", art, "--iters", str(iters)], check=True,
                         capture_output=True, text=True).stdout
    vals = {}
    for line in out.splitlines():
        if "=" in line and line.split("=", 1)[0].endswith("_us"):
            k, v = line.split("=", 1)
            vals[k] = float(v)
        elif line.startswith("sections_decompressed_per_load"):
            vals["sections"] = line.split(":", 1)[1].strip()
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "magi-aot"))
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--baseline", default=None, help="another build's magi-aot, run alternately")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("json", nargs="*", default=[os.path.join(ROOT, "fixtures/real/stack24.json"),
                                                 os.path.join(ROOT, "fixtures/real/fsdp_block.json")])
    a = ap.parse_args()
    rounds = a.rounds or (3 if a.baseline else 1)
    print("%-16s %10s %12s %14s %12s %10s  %s" % ("region", "json.loads", "loader", "verify+load",
                                                   "open+load", "ratio", "sections decoded")
          + ("  %12s %8s" % ("baseline", "new/old") if a.baseline else ""))
    sizes = []
    with tempfile.TemporaryDirectory() as d:
        for src in a.json:
            name = os.path.splitext(os.path.basename(src))[0]
            art = os.path.join(d, name + ".magi")
            subprocess.run([a.cli, "save", src, "-o", art], check=True, capture_output=True)
            art_old = art
            if a.baseline:
                art_old = os.path.join(d, name + ".baseline.magi")
                subprocess.run([a.baseline, "save", src, "-o", art_old], check=True, capture_output=True)
            sizes.append("%s: %d bytes%s" % (name, os.path.getsize(art), " (baseline's: %d)" %
                                            os.path.getsize(art_old) if a.baseline else ""))
            with open(src) as f:
                text = f.read()
            # json.loads before and after the C run, so both see the same load
            js, cs, bs = [json_loads_us(text, max(50, a.iters // 10))], [], []
            for _ in range(rounds):
                cs.append(bench_cli(a.cli, art, a.iters))
                if a.baseline:
                    bs.append(bench_cli(a.baseline, art_old, a.iters))
                js.append(json_loads_us(text, max(50, a.iters // 10)))
            jl = statistics.median(js)
            med = lambda runs, k: statistics.median(r[k] for r in runs)
            c = {k: med(cs, k) for k in ("loader_reused_median_us", "open_verify_load_median_us",
                                         "open_load_median_us")}
            line = "%-16s %8.1fus %10.1fus %12.1fus %10.1fus %9.1fx  %s" % (
                name, jl, c["loader_reused_median_us"], c["open_verify_load_median_us"],
                c["open_load_median_us"], jl / c["loader_reused_median_us"], cs[0].get("sections", "?"))
            if a.baseline:
                b = med(bs, "loader_reused_median_us")
                line += "  %10.1fus %7.2fx" % (b, c["loader_reused_median_us"] / b)
            print(line)
    print("artifacts: " + "; ".join(sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
