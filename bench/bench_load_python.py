"""Load-path benchmark through Python: python3 bench/bench_load_python.py FILE... [-n N]

For each file (magi-fx JSON or artifact), prints the median and minimum
wall time of: load() with the copy-engine plan, load() without it,
fingerprint(), inputs(concrete=True) and, when the file is JSON, save_doc()
to an artifact. No torch needed.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from magi_aot import fingerprint, inputs, load, save_doc  # noqa: E402


def _time(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), min(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 bench/bench_load_python.py")
    ap.add_argument("files", nargs="+")
    ap.add_argument("-n", type=int, default=20, help="repetitions (default 20)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        for f in a.files:
            r = load(f)
            rows = [("load (copy_engine plan)", lambda: load(f)),
                    ("load (no plan)", lambda: load(f, transport=None)),
                    ("fingerprint", lambda: fingerprint(f)),
                    ("inputs concrete", lambda: inputs(f, concrete=True))]
            if f.endswith(".json"):
                with open(f) as fh:
                    doc = json.load(fh)
                art = os.path.join(d, "bench.magi")
                rows.append(("save_doc -> artifact", lambda: save_doc(doc, art)))
                rows.append(("load artifact", lambda: load(art)))
            print("%s: %d nodes, %d placeholders" % (f, len(r.nodes), len(r.placeholders)))
            for name, fn in rows:
                med, best = _time(fn, a.n)
                print("  %-26s median %8.3f ms   min %8.3f ms" % (name, 1e3 * med, 1e3 * best))


if __name__ == "__main__":
    main()
