#!/usr/bin/env python3
"""Host time per call of magi::symm_all_gather_coalesced, C++ kernels
against the Python ones and torch's coalesced gather, in one run.

    MAGI_AOT_LIB=build/libmagi_aot.so python3 bench/bench_symm_ops.py [--calls N] [--device cpu|cuda]

Runs python/tests/bucket_ranks.py (4 rank processes gathering the 20-input
bucket tests/symm_data/synth_bucket.json) once with MAGI_AOT_OPS=python and
once with MAGI_AOT_OPS=c++, then bench/nccl_bucket_host.py (torch's
`all_gather_into_tensor_coalesced` on the same shapes, one rank: NCCL on
cuda, gloo on cpu), and prints the median host time per call (median over
the ranks) of: the call alone; the call and one wait_tensor (what a loaded
graph holds: the loader keeps one wait per coalesced call); the call and a
wait_tensor on each of its 20 outputs (a traced graph as read); and the
call and one wait, and the call and every wait, with the device idle at
each call ("idle": synchronised outside the clock, so no queue of earlier
copies is behind the call: the host's own cost). The C++
run needs the extension (built with the library when torch is
importable: MAGI_TORCH_OPS).
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
TORCH_REF = os.path.join(ROOT, "bench", "nccl_bucket_host.py")


KEYS = ("host_us_op_median", "host_us_one_wait_median", "host_us_median",
        "host_us_idle_one_wait_median", "host_us_idle_median")


def run(impl, calls, device, profile_to=None):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, MAGI_AOT_OPS=impl, MAGI_BUCKET_TIMED_CALLS=str(calls))
        if profile_to:
            env["MAGI_BUCKET_TORCH_PROFILE"] = "1"
        proc = subprocess.run([sys.executable, BUCKET, "--device", device, "--dir", d], env=env,
                              capture_output=True, text=True, timeout=900)
        if proc.returncode:
            sys.exit("%s kernels: bucket_ranks failed\n%s%s" % (impl, proc.stdout[-3000:], proc.stderr[-3000:]))
        if profile_to:
            import shutil
            shutil.copyfile(os.path.join(d, "rank0.torchprof.txt"), profile_to)
        out = []
        for r in range(4):
            with open(os.path.join(d, "rank%d.json" % r)) as f:
                out.append(json.load(f))
        return out


def torch_ref(calls, device):
    backend = "nccl" if device == "cuda" else "gloo"
    proc = subprocess.run([sys.executable, TORCH_REF, "--calls", str(calls), "--backend", backend],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        sys.exit("torch %s: nccl_bucket_host failed\n%s%s" % (backend, proc.stdout[-3000:], proc.stderr[-3000:]))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000, help="timed calls per rank (default 2000)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--profile", metavar="DIR", help="also write torch.profiler tables of rank 0 "
                    "(CUDA runtime calls included) per implementation into DIR (outside the figures)")
    a = ap.parse_args()
    res = {}
    for impl in ("python", "c++"):
        prof = None
        if a.profile:
            os.makedirs(a.profile, exist_ok=True)
            prof = os.path.join(a.profile, "torchprof-%s.txt" % impl.replace("+", "p"))
        res[impl] = run(impl, a.calls, a.device, prof)
        got = {r["implementation"] for r in res[impl]}
        if got != {impl}:
            sys.exit("asked for the %s kernels, got %s" % (impl, sorted(got)))
    ref = torch_ref(a.calls, a.device)
    rows = {}
    for impl, rr in res.items():
        rows["magi " + impl] = tuple(statistics.median(r[k] for r in rr)
                                     for k in KEYS)
    rows["torch %s" % ref["backend"]] = tuple(ref[k] for k in KEYS)
    print("host us per call, 20-input bucket on %s, %d calls (magi: median over 4 ranks; torch: 1 rank)"
          % (a.device, a.calls))
    print("%-12s %12s %14s %15s %20s %21s" % ("", "call alone", "call + 1 wait", "call + 20 waits",
                                              "idle: call + 1 wait", "idle: call + 20 waits"))
    for name, (alone, one, every, idle, idle_every) in rows.items():
        print("%-12s %12.1f %14.1f %15.1f %20.1f %21.1f" % (name, alone, one, every, idle, idle_every))
    c = rows["magi c++"]
    t = rows["torch %s" % ref["backend"]]
    print("magi c++ with the loaded graph's waits (1) vs torch with every wait (20): %.1f vs %.1f us (%.2fx)"
          % (c[1], t[2], c[1] / t[2]))
    print("the same with the device idle at each call: %.1f vs %.1f us (%.2fx)" % (c[3], t[4], c[3] / t[4]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "calls": a.calls, "rows": rows, "torch": ref["torch"]}, f, indent=1)


if __name__ == "__main__":
    main()
