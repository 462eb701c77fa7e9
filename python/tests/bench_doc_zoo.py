"""Document load speed on real regions: traces tiny gpt2 and bert (CPU,
tests/zoo.py), writes their artifacts, and runs bench/bench_doc.py on them
(JSON text vs marshal vs pickle.loads of the same document, one run).

    MAGI_AOT_LIB=build/libmagi_aot.so python3 python/tests/bench_doc_zoo.py [-n N] [--models gpt2,bert]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import zoo  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--models", default="gpt2,bert")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import bench_doc
    from magi_aot.cache import _Cache
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        files = []
        for name in a.models.split(","):
            rows, _ = zoo.trace(name, cache)
            with _Cache(cache) as c:
                for row in rows:
                    path = os.path.join(d, "%s_%d.magi" % (name, row["region"]))
                    with open(path, "wb") as f:
                        f.write(c.get(row["key"]))
                    files.append(path)
        bench_doc.main(files + ["-n", str(a.n)])


if __name__ == "__main__":
    main()
