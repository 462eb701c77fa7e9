"""Document load speed through Python, side by side in one run:

    python3 -m magi_aot.bench_doc FILE... [-n N]

For each region file (artifact or JSON), the C region is loaded once; then,
per repetition, its document is built as Python objects three ways:
  json      magi_json_write -> json.loads   (the JSON detour)
  marshal   magi_marshal_write -> marshal.loads  (magi_aot.docio)
  pickle    pickle.loads of the same document pickled once beforehand
            (protocol 5; the anchor: what a Python-only cache would pay)
Also the whole-file paths: read + verify + decode + document (C load +
marshal) vs open + pickle.loads of a pickled document file. Prints median
and minimum per path (the paths take turns, one call each per round) and
marshal's ratio to pickle. No torch needed.
"""
import argparse
import os
import pickle
import statistics
import tempfile
import time
from ctypes import byref, c_void_p

from . import docio
from ._lib import cstr, lib


def _interleaved(rows, n):
    """{name: (median, min)}: the paths take turns, one call each per round,
    so a noisy neighbour slows them alike."""
    times = {name: [] for name, _ in rows}
    for _ in range(n):
        for name, fn in rows:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(v), min(v)) for name, v in times.items()}


def _load_c(path):
    p = c_void_p()
    lib.magi_load_file(byref(p), cstr(path), None)
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m magi_aot.bench_doc")
    ap.add_argument("files", nargs="+")
    ap.add_argument("-n", type=int, default=200, help="repetitions (default 200)")
    a = ap.parse_args(argv)
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        for f in a.files:
            ptr = _load_c(f)
            try:
                doc = docio.document_json(ptr)
                if docio.document(ptr) != doc:
                    raise SystemExit("%s: marshal document differs from the JSON one" % f)
                blob = pickle.dumps(doc, protocol=5)
                n_marshal = len(docio.document_bytes(ptr))
                pk = os.path.join(d, "doc.pickle")
                with open(pk, "wb") as fh:
                    fh.write(blob)

                def whole_c():
                    p = _load_c(f)
                    try:
                        return docio.document(p)
                    finally:
                        lib.magi_region_free(p)

                def whole_pickle():
                    with open(pk, "rb") as fh:
                        return pickle.loads(fh.read())

                rows = [("document: json", lambda: docio.document_json(ptr)),
                        ("document: marshal", lambda: docio.document(ptr)),
                        ("document: pickle.loads", lambda: pickle.loads(blob)),
                        ("file: C load + marshal", whole_c),
                        ("file: read + pickle.loads", whole_pickle)]
                res = _interleaved(rows, a.n)
            finally:
                lib.magi_region_free(ptr)
            print("%s: %d nodes, marshal %d bytes, pickle %d bytes" % (
                f, len(doc["graph"]["nodes"]), n_marshal, len(blob)))
            for name, _ in rows:
                med, best = res[name]
                print("  %-28s median %8.3f ms   min %8.3f ms" % (name, 1e3 * med, 1e3 * best))
            ratio = res["document: marshal"][0] / res["document: pickle.loads"][0]
            ratio_min = res["document: marshal"][1] / res["document: pickle.loads"][1]
            worst = max(worst, ratio)
            print("  marshal / pickle.loads: median %.2fx, min %.2fx   json / pickle.loads: "
                  "median %.2fx" % (ratio, ratio_min,
                                    res["document: json"][0] / res["document: pickle.loads"][0]))
    print("worst marshal / pickle.loads ratio (median): %.2fx (goal: below 1)" % worst)


if __name__ == "__main__":
    main()
