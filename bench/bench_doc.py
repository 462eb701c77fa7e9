"""Document load speed through Python, side by side in one run:

    python3 bench/bench_doc.py FILE... [-n N]

For each region file (artifact or JSON), the C region is loaded once; then,
per repetition, its document is built as Python objects each way
magi_aot.docio has, beside the anchor:
  json      magi_json_write -> json.loads   (the JSON detour)
  marshal   magi_marshal_write -> marshal.loads
  direct    the extension magi_aot._docbuild (when built; docio.py)
  pickle    pickle.loads of the same document pickled once beforehand
            (protocol 5; the anchor: what a Python-only cache would pay)
Also the whole-file paths: read + verify + decode + document (C load +
docio.document, the fastest path) vs open + pickle.loads of a pickled
document file. Prints median and minimum per path (the paths take turns,
one call each per round) and the fastest magi path's ratio to pickle.
No torch needed.
"""
import argparse
import os
import pickle
import statistics
import tempfile
import sys
import time
from ctypes import byref, c_void_p

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from magi_aot import docio  # noqa: E402
from magi_aot._lib import cstr, lib  # noqa: E402


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
    ap = argparse.ArgumentParser(prog="python3 bench/bench_doc.py")
    ap.add_argument("files", nargs="+")
    ap.add_argument("-n", type=int, default=200, help="repetitions (default 200)")
    a = ap.parse_args(argv)
    worst = 0.0
    direct = docio.extension() is not None
    paths = ["json", "marshal"] + (["direct"] if direct else [])
    print("document paths: %s; docio.document uses %s%s" % (
        ", ".join(paths), docio.path_used(),
        "" if direct else " (no direct path: %s)" % docio.extension_missing()))
    with tempfile.TemporaryDirectory() as d:
        for f in a.files:
            ptr = _load_c(f)
            try:
                doc = docio.document_json(ptr)
                for p in paths[1:]:
                    if getattr(docio, "document_" + p)(ptr) != doc:
                        raise SystemExit("%s: the %s document differs from the JSON one" % (f, p))
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
                        ("document: marshal", lambda: docio.document_marshal(ptr))]
                if direct:
                    rows.append(("document: direct", lambda: docio.document_direct(ptr)))
                rows += [("document: pickle.loads", lambda: pickle.loads(blob)),
                         ("file: C load + document", whole_c),
                         ("file: read + pickle.loads", whole_pickle)]
                res = _interleaved(rows, a.n)
            finally:
                lib.magi_region_free(ptr)
            print("%s: %d nodes, marshal %d bytes, pickle %d bytes" % (
                f, len(doc["graph"]["nodes"]), n_marshal, len(blob)))
            for name, _ in rows:
                med, best = res[name]
                print("  %-28s median %8.3f ms   min %8.3f ms" % (name, 1e3 * med, 1e3 * best))
            pk_med, pk_min = res["document: pickle.loads"]
            print("  / pickle.loads (median, min): " + "   ".join(
                "%s %.2fx %.2fx" % (p, res["document: " + p][0] / pk_med, res["document: " + p][1] / pk_min)
                for p in paths))
            best = min(paths, key=lambda p: res["document: " + p][0])
            ratio = res["document: " + best][0] / pk_med
            print("  fastest magi path: %s, %.2fx pickle.loads (median)" % (best, ratio))
            worst = max(worst, ratio)
    print("worst fastest-magi-path / pickle.loads ratio (median): %.2fx (goal: below 1)" % worst)


if __name__ == "__main__":
    main()
