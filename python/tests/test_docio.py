"""The marshal document path (magi_marshal_write + marshal.loads) gives the
same document as the JSON path, for every fixture; no torch."""
import glob
import json
import marshal
import os
import unittest
from ctypes import byref, c_void_p

from _util import REAL, ROOT, fixture

from magi_aot import docio
from magi_aot._lib import cstr, has, lib


def _load(path):
    p = c_void_p()
    lib.magi_load_file(byref(p), cstr(path), None)
    return p


@unittest.skipUnless(has("magi_marshal_write"), "library without magi_marshal_write")
class MarshalDocument(unittest.TestCase):
    def files(self):
        out = [fixture(n) for n in REAL]
        out += sorted(glob.glob(os.path.join(ROOT, "fixtures", "floats", "*.json")))
        out += sorted(glob.glob(os.path.join(ROOT, "fixtures", "v0", "*.v0")))
        return out

    def test_equals_the_json_document_for_every_fixture(self):
        files = self.files()
        self.assertGreater(len(files), 5)
        for f in files:
            with self.subTest(os.path.basename(f)):
                p = _load(f)
                try:
                    want = docio.document_json(p)
                    got = docio.document(p)
                    data = docio.document_bytes(p)
                finally:
                    lib.magi_region_free(p)
                self.assertEqual(got, want)
                # same key order as the JSON text, everywhere
                self.assertEqual(json.dumps(got), json.dumps(want))
                self.assertEqual(marshal.loads(data), want)

    def test_values_of_every_kind(self):
        doc = {"format": "magi-fx-json", "version": 1, "model_tag": "t\u00e9st", "model_idx": 3,
               "traced_files": ["a.py", "b/\u00fc.py"],
               "compile_config": {"k": [1, 2.5, None, True, {"n": -(2 ** 40)}], "s": "x"},
               "symbols": {"s0": {"hint": 2 ** 40}, "zf0": {"hint": -0.5}, "u0": {"hint": None}},
               "graph": {"nodes": [
                   {"name": "x", "op": "placeholder", "target": "x",
                    "meta": {"example_value": {"kind": "tensor", "dtype": "float32",
                                               "shape": ["s0", 3], "stride": [3, 1],
                                               "storage_offset": 0, "device": "cpu",
                                               "requires_grad": False, "real": [1, "q"]}}},
                   {"name": "y", "op": "call_function", "target": "f",
                    "args": [{"node": "x"}, -(2 ** 62), 2 ** 31, -(2 ** 31) - 1, 1.5,
                             {"float": "inf"}, {"float": "nan"}, "str", None, True,
                             {"tuple": [1, [2, {"slice": [None, 3, None]}]]},
                             {"dict": {"a": {"dtype": "bfloat16"}}}, {"sym": "s0 + 1"},
                             {"device": "cuda:0"}, {"layout": "strided"},
                             {"memory_format": "contiguous_format"}, {"ellipsis": True},
                             {"opaque": "Foo"}],
                    "kwargs": {"k": {"sym": 4}}},
                   {"name": "output", "op": "output", "target": "output",
                    "args": [{"node": "y"}]}]}}
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kinds.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            p = _load(path)
            try:
                want = docio.document_json(p)
                got = docio.document(p)
            finally:
                lib.magi_region_free(p)
        self.assertEqual(got, want)
        self.assertEqual(json.dumps(got), json.dumps(want))
        self.assertEqual(got["symbols"]["s0"]["hint"], 2 ** 40)
        self.assertEqual(got["graph"]["nodes"][1]["args"][1], -(2 ** 62))


if __name__ == "__main__":
    unittest.main()
