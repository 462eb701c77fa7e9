"""Every document path of magi_aot.docio (the direct extension, marshal)
gives the same document as the JSON path, for every fixture read from JSON
and from an artifact; bad regions raise, never crash; without the
extension document() falls back to marshal. No torch.

The direct path's tests skip only where the extension was not built; under
CTest, MAGI_DOCBUILD_EXPECTED=1 says the build made it, and then a missing
extension fails instead."""
import ctypes
import glob
import json
import marshal
import os
import subprocess
import sys
import tempfile
import unittest
from ctypes import POINTER, byref, c_void_p

from _util import HERE, REAL, ROOT, fixture

from magi_aot import docio
from magi_aot._lib import CRegion, LoadOptions, MagiError, RegionStruct, cstr, has, lib

EXPECTED = os.environ.get("MAGI_DOCBUILD_EXPECTED") == "1"
HAS_DIRECT = docio.extension() is not None
NO_DIRECT = "no document extension: %s" % docio.extension_missing()


def _load(path, max_depth=0):
    p = c_void_p()
    opts = LoadOptions(max_depth=max_depth) if max_depth else None
    lib.magi_load_file(byref(p), cstr(path), byref(opts) if opts else None)
    return p


def _paths():
    out = []
    if has("magi_marshal_write"):
        out.append(("marshal", docio.document_marshal))
    if HAS_DIRECT:
        out.append(("direct", docio.document_direct))
    return out


def _files():
    out = [fixture(n) for n in REAL]
    out += sorted(glob.glob(os.path.join(ROOT, "fixtures", "floats", "*.json")))
    out += sorted(glob.glob(os.path.join(ROOT, "fixtures", "v0", "*.v0")))
    return out


KINDS = {"format": "magi-fx-json", "version": 1, "model_tag": "t\u00e9st", "model_idx": 3,
         "traced_files": ["a.py", "b/\u00fc.py"],
         "compile_config": {"k": [1, 2.5, None, True, {"n": -(2 ** 40)}], "s": "x\u2603"},
         "symbols": {"s0": {"hint": 2 ** 40}, "zf0": {"hint": -0.5}, "u0": {"hint": None}},
         "graph": {"nodes": [
             {"name": "x", "op": "placeholder", "target": "x",
              "meta": {"example_value": {"kind": "tensor", "dtype": "float32",
                                         "shape": ["s0", 3], "stride": [3, 1],
                                         "storage_offset": 0, "device": "cpu",
                                         "requires_grad": False, "real": [1, "q"]}}},
             {"name": "y", "op": "call_function", "target": "f",
              "args": [{"node": "x"}, -(2 ** 62), 2 ** 31, -(2 ** 31) - 1, 1.5, -0.0,
                       {"float": "inf"}, {"float": "nan"}, "str", None, True, False,
                       {"tuple": [1, [2, {"slice": [None, 3, None]}]]}, [], {"tuple": []},
                       {"dict": {"a": {"dtype": "bfloat16"}}}, {"dict": {}}, {"sym": "s0 + 1"},
                       {"device": "cuda:0"}, {"layout": "strided"},
                       {"memory_format": "contiguous_format"}, {"ellipsis": True},
                       {"opaque": "Foo"}, "\u00e9\U0001f600"],
              "kwargs": {"k": {"sym": 4}}},
             {"name": "output", "op": "output", "target": "output",
              "args": [{"node": "y"}]}]}}


def _same(a, b):
    """a == b (types and key order included) without recursion: == on a
    document 1500 lists deep exceeds some Pythons' C recursion limit."""
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            if list(x) != list(y):
                return False
            todo.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            todo.extend(zip(x, y))
        elif x != y:
            return False
    return True


class DocumentPaths(unittest.TestCase):
    def assert_same(self, p, what):
        want = docio.document_json(p)
        paths = _paths()
        self.assertTrue(paths, "no path besides JSON to compare")
        for name, fn in paths:
            with self.subTest(what=what, path=name):
                got = fn(p)
                self.assertEqual(got, want)
                # same key order as the JSON text, everywhere
                self.assertEqual(json.dumps(got), json.dumps(want))
        self.assertEqual(docio.document(p), want)
        return want

    def test_equals_the_json_document_for_every_fixture(self):
        files = _files()
        self.assertGreater(len(files), 5)
        for f in files:
            p = _load(f)
            try:
                want = self.assert_same(p, os.path.basename(f))
                self.assertEqual(marshal.loads(docio.document_bytes(p)), want)
                blob = CRegion(p).encode()  # the same region as an artifact (interned strings)
            finally:
                lib.magi_region_free(p)
            with tempfile.TemporaryDirectory() as d:
                art = os.path.join(d, "r.magi")
                with open(art, "wb") as fh:
                    fh.write(blob)
                p = _load(art)
                try:
                    self.assertEqual(self.assert_same(p, os.path.basename(f) + " artifact"), want)
                finally:
                    lib.magi_region_free(p)

    def _load_doc(self, doc, **kw):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "doc.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            return _load(path, **kw)

    def test_values_of_every_kind(self):
        p = self._load_doc(KINDS)
        try:
            got = self.assert_same(p, "kinds")
        finally:
            lib.magi_region_free(p)
        self.assertEqual(got["symbols"]["s0"]["hint"], 2 ** 40)
        self.assertEqual(got["graph"]["nodes"][1]["args"][1], -(2 ** 62))
        self.assertEqual(got["graph"]["nodes"][1]["args"][-1], "\u00e9\U0001f600")
        self.assertEqual(got["compile_config"]["s"], "x\u2603")

    def test_repeated_strings_are_one_object(self):
        if not HAS_DIRECT:
            self.skipTest(NO_DIRECT)
        p = _load(fixture("stack24"))
        try:
            doc = docio.document_direct(p)
        finally:
            lib.magi_region_free(p)
        nodes = doc["graph"]["nodes"]
        keys = [k for n in nodes for k in n if k == "target"]
        self.assertGreater(len(keys), 10)
        self.assertTrue(all(k is keys[0] for k in keys))
        self.assertEqual(len({id(n["op"]) for n in nodes if n["op"] == "call_function"}), 1)

    def test_deep_nesting(self):
        # deeper than json.loads can follow, within the loader's ceiling (MAGI_MAX_DEPTH_CEILING)
        depth = 1010
        doc = json.loads(json.dumps(KINDS))
        doc["graph"]["nodes"][1]["args"] = ["DEEP"]
        text = json.dumps(doc).replace('"DEEP"', "[" * depth + "1" + "]" * depth)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "deep.json")
            with open(path, "w") as f:
                f.write(text)
            p = _load(path, max_depth=1024)
        try:
            docs = [fn(p) for _, fn in _paths()]
        finally:
            lib.magi_region_free(p)
        self.assertTrue(docs)
        for got in docs:
            v = got["graph"]["nodes"][1]["args"][0]
            for _ in range(depth):
                self.assertIsInstance(v, list)
                self.assertEqual(len(v), 1)
                v = v[0]
            self.assertEqual(v, 1)
        for g in docs[1:]:
            self.assertTrue(_same(g, docs[0]))


class FuzzCorpus(unittest.TestCase):
    def test_every_region_the_loader_accepts_from_the_fuzz_corpora(self):
        """Hostile inputs kept by the fuzzers: where the loader accepts one,
        every path gives the same document, or every path raises."""
        accepted = 0
        for f in sorted(glob.glob(os.path.join(ROOT, "fuzz", "corpus", "*", "*"))):
            try:
                p = _load(f)
            except MagiError:
                continue
            accepted += 1
            try:
                got = []
                for name, fn in [("json", docio.document_json)] + _paths():
                    try:
                        got.append((name, fn(p)))
                    except (ValueError, MagiError) as e:  # UnicodeDecodeError is a ValueError
                        got.append((name, type(e)))
            finally:
                lib.magi_region_free(p)
            with self.subTest(os.path.relpath(f, ROOT)):
                ok = [isinstance(v, dict) for _, v in got]
                self.assertTrue(all(ok) or not any(ok), got if not all(ok) else "")
                for name, v in got[1:]:
                    if isinstance(v, dict):
                        self.assertEqual(v, got[0][1], name)
        self.assertGreater(accepted, 10)


class _NodeHead(ctypes.Structure):
    """Leading fields of struct magi_node (graph.h, transparent)."""
    _fields_ = [("name", c_void_p), ("op", ctypes.c_int), ("target", c_void_p)]


class BadRegions(unittest.TestCase):
    """Regions the readers would not produce, made by editing a loaded one:
    every path raises an error naming what failed; nothing partial."""

    def setUp(self):
        self.p = _load(fixture("block"))
        self.r = ctypes.cast(self.p, POINTER(RegionStruct)).contents

    def tearDown(self):
        lib.magi_region_free(self.p)

    def test_a_name_that_is_not_utf8(self):
        bad = ctypes.create_string_buffer(b"ab\xff\xfe")
        names = ctypes.cast(self.r.nodes, POINTER(c_void_p))  # a node's first field is its name
        keep = names[0]
        names[0] = ctypes.addressof(bad)
        try:
            for name, fn in [("json", docio.document_json)] + _paths():
                with self.subTest(path=name):
                    with self.assertRaises(MagiError) as cm:
                        fn(self.p)
                    self.assertEqual(cm.exception.status, "MAGI_ERR_FORMAT")
                    self.assertIn("not UTF-8", cm.exception.message)
        finally:
            names[0] = keep

    def test_a_surrogate_is_refused_by_every_path(self):
        """UTF-8-encoded surrogates (which marshal.loads alone would take)
        get one verdict: MagiError MAGI_ERR_FORMAT naming the node."""
        for raw in (b"f\xed\xa0\x80", b"f\xed\xbf\xbfg"):
            bad = ctypes.create_string_buffer(raw)
            node = _NodeHead.from_address(self.r.nodes)
            nm = ctypes.string_at(node.name).decode()
            keep = node.target
            node.target = ctypes.addressof(bad)
            try:
                for name, fn in [("json", docio.document_json)] + _paths():
                    with self.subTest(raw=raw, path=name):
                        with self.assertRaises(MagiError) as cm:
                            fn(self.p)
                        self.assertEqual(cm.exception.status, "MAGI_ERR_FORMAT")
                        self.assertIn("not UTF-8", cm.exception.message)
                        if name != "direct" or sys.version_info >= (3, 11):  # the node: a note from 3.11
                            self.assertRegex(cm.exception.message, r"node (#0 )?'%s'" % nm)
            finally:
                node.target = keep

    def test_compile_config_that_is_not_json(self):
        bad = ctypes.create_string_buffer(b'{"a": [1,')
        keep_flags = self.r.flags
        off = RegionStruct.compile_config_json.offset
        slot = ctypes.c_void_p.from_address(ctypes.addressof(self.r) + off)
        keep = slot.value
        self.r.flags |= 0x8  # MAGI_REGION_HAS_COMPILE_CONFIG
        slot.value = ctypes.addressof(bad)
        try:
            for name, fn in _paths():
                with self.subTest(path=name):
                    with self.assertRaises(MagiError) as cm:
                        fn(self.p)
                    self.assertEqual(cm.exception.status, "MAGI_ERR_FORMAT")
                    self.assertIn("compile_config is not JSON", cm.exception.message)
        finally:
            slot.value = keep
            self.r.flags = keep_flags


class DeepOpaqueJson(unittest.TestCase):
    """An example's extra members nested deeper than the load's max_depth:
    one verdict wherever the region comes from (JSON text, an artifact),
    MagiError MAGI_ERR_LIMIT naming the node, never a region whose document
    json.loads, marshal.loads or copy.deepcopy (localize) cannot follow."""

    def test_a_1000_deep_extra_members_object_is_refused(self):
        import magi_aot
        depth = 1000  # written under the raised limit's ceiling (MAGI_MAX_DEPTH_CEILING)
        doc = {"format": "magi-fx-json", "version": 1, "graph": {"nodes": [
            {"name": "x", "op": "placeholder", "target": "x",
             "meta": {"example_value": {"kind": "int", "value": 3, "deep": "DEEP"}}},
            {"name": "output", "op": "output", "target": "output", "args": [{"node": "x"}]}]}}
        text = json.dumps(doc).replace('"DEEP"', '{"a":' * (depth - 1) + "1" + "}" * (depth - 1))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "deep.json")
            with open(path, "w") as f:
                f.write(text)
            p = _load(path, max_depth=1024)  # under a raised limit it reads
            try:
                blob = CRegion(p).encode()
            finally:
                lib.magi_region_free(p)
            art = os.path.join(d, "deep.magi")
            with open(art, "wb") as fh:
                fh.write(blob)
            for what, call in [("json", lambda: magi_aot.load(path)), ("artifact", lambda: magi_aot.load(art)),
                               ("bytes", lambda: magi_aot.load_bytes(blob)),
                               ("file", lambda: lib.magi_region_free(_load(art)))]:
                with self.subTest(what):
                    with self.assertRaises(MagiError) as cm:
                        call()
                    self.assertEqual(cm.exception.status, "MAGI_ERR_LIMIT")
                    self.assertIn("node 'x'", cm.exception.message)
                    self.assertIn("nested deeper than 128", cm.exception.message)


class Fallback(unittest.TestCase):
    def test_direct_extension_is_there_when_the_build_made_it(self):
        if EXPECTED:
            self.assertTrue(HAS_DIRECT, NO_DIRECT)
            self.assertEqual(docio.path_used(), "direct")
        elif not HAS_DIRECT:
            self.skipTest(NO_DIRECT)

    def test_an_installed_library_found_by_soname_is_located(self):
        real = os.path.realpath(docio.lib_path())
        saved = docio.lib_path
        docio.lib_path = lambda: os.path.basename(saved()).split(".so")[0] + ".so.0"
        try:
            self.assertEqual(os.path.realpath(docio._lib_dir()), os.path.dirname(real))
        finally:
            docio.lib_path = saved

    def test_forced_fallback_uses_marshal_and_gives_the_same_document(self):
        code = ("import sys; sys.path.insert(0, %r); import _util, json\n"
                "from magi_aot import docio\n"
                "from test_docio import _load\n"
                "from magi_aot._lib import lib\n"
                "p = _load(_util.fixture('mixed'))\n"
                "print(json.dumps([docio.path_used(), docio.extension_missing(), "
                "docio.document(p) == docio.document_json(p)]))\n" % HERE)
        env = dict(os.environ, MAGI_AOT_DOCBUILD="0")
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=HERE,
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        path, why, same = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertEqual(path, "marshal")
        self.assertIn("MAGI_AOT_DOCBUILD", why)
        self.assertTrue(same)


if __name__ == "__main__":
    unittest.main()
