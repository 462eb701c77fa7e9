#!/usr/bin/env python3
"""Host time per call of magi::symm_all_gather_coalesced, C++ kernels
against the Python ones, on the CPU (host backend).

    MAGI_AOT_LIB=build/libmagi_aot.so python3 bench/bench_symm_ops.py [--calls N]

Runs python/tests/bucket_ranks.py (4 rank processes gathering the 20-input
bucket tests/symm_data/synth_bucket.json) once with MAGI_AOT_OPS=python and
once with MAGI_AOT_OPS=c++, and prints each rank's median host time per
call: the operator alone, and the operator plus the wait_tensor on each of
its 20 outputs (as a traced graph runs it), then the ratio of the medians
over the ranks. The C++ run needs the extension (built with the library
when torch is importable: MAGI_TORCH_OPS).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = os.path.join(ROOT, "python", "tests", "bucket_ranks.py")


def run(impl, calls):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, MAGI_AOT_OPS=impl, MAGI_BUCKET_TIMED_CALLS=str(calls))
        proc = subprocess.run([sys.executable, BUCKET, "--device", "cpu", "--dir", d], env=env,
                              capture_output=True, text=True, timeout=900)
        if proc.returncode:
            sys.exit("%s kernels: bucket_ranks failed\n%s%s" % (impl, proc.stdout[-3000:], proc.stderr[-3000:]))
        out = []
        for r in range(4):
            with open(os.path.join(d, "rank%d.json" % r)) as f:
                out.append(json.load(f))
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000, help="timed calls per rank (default 2000)")
    a = ap.parse_args()
    res = {}
    for impl in ("python", "c++"):
        res[impl] = run(impl, a.calls)
        got = {r["implementation"] for r in res[impl]}
        if got != {impl}:
            sys.exit("asked for the %s kernels, got %s" % (impl, sorted(got)))
    print("host us per call, 20-input bucket, 4 ranks, %d calls each (median per rank)" % a.calls)
    print("%-8s %-34s %s" % ("kernels", "operator alone", "operator + 20 wait_tensor"))
    med = {}
    for impl, rows in res.items():
        alone = [r["host_us_op_median"] for r in rows]
        waited = [r["host_us_median"] for r in rows]
        med[impl] = (statistics.median(alone), statistics.median(waited))
        print("%-8s %-34s %s" % (impl, " ".join("%7.1f" % x for x in alone), " ".join("%7.1f" % x for x in waited)))
    print("python / c++: operator alone %.1fx, with the waits %.1fx"
          % (med["python"][0] / med["c++"][0], med["python"][1] / med["c++"][1]))


if __name__ == "__main__":
    main()
