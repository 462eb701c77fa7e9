"""The ctypes copies of the unstable structs (magi_aot/_lib.py) are checked
against the library when it is loaded: a copy that disagrees with the
library on an offset or a size is refused, naming the field."""
import ctypes
import os
import unittest
from ctypes import Structure, c_char_p, c_double, c_int, c_int64, c_uint32

from _util import ROOT  # noqa: F401  (puts the package on sys.path)

from magi_aot import _lib


class TestLayoutCheck(unittest.TestCase):
    def setUp(self):
        self.path = _lib.lib.path
        self.dll = ctypes.CDLL(self.path)

    def test_copies_agree_with_the_library(self):
        _lib.check_layout(self.dll, self.path)
        f = self.dll.magi_unstable_layout
        f.restype, f.argtypes = c_int64, [c_char_p]
        self.assertEqual(f(b"magi_region.n_nodes"), _lib.RegionStruct.n_nodes.offset)
        self.assertEqual(f(b"magi_expr"), ctypes.sizeof(_lib.ExprStruct))
        self.assertEqual(f(b"magi_region.no_such_field"), -1)

    def test_field_missing_from_a_leading_copy(self):
        class Region(Structure):  # "flags" left out: every later offset moves
            _fields_ = [f for f in _lib.RegionStruct._fields_ if f[0] != "flags"]
        with self.assertRaises(OSError) as cm:
            _lib.check_layout(self.dll, self.path, ((Region, "magi_region", False),))
        msg = str(cm.exception)
        self.assertIn("offset of magi_region.model_tag is 16 there and 8", msg)
        self.assertIn("different builds", msg)

    def test_size_of_a_whole_copy(self):
        class Expr(Structure):
            _fields_ = [f for f in _lib.ExprStruct._fields_ if f[0] != "fval"]
        with self.assertRaises(OSError) as cm:
            _lib.check_layout(self.dll, self.path, ((Expr, "magi_expr", True),))
        self.assertIn("size of magi_expr is %d there" % ctypes.sizeof(_lib.ExprStruct), str(cm.exception))

    def test_field_the_library_does_not_have(self):
        class Expr(Structure):
            _fields_ = [("kind", c_int), ("ival", c_int64), ("renamed", c_char_p), ("x", c_uint32),
                        ("y", c_double)]
        with self.assertRaises(OSError) as cm:
            _lib.check_layout(self.dll, self.path, ((Expr, "magi_expr", True),))
        self.assertIn("offset of magi_expr.renamed is unknown there", str(cm.exception))

    def test_library_without_the_check(self):
        with self.assertRaises(OSError) as cm:
            _lib.check_layout(object(), "/x/libmagi_aot.so")
        self.assertIn("/x/libmagi_aot.so does not export magi_unstable_layout", str(cm.exception))

    def test_load_refused_and_nothing_kept(self):
        class Region(Structure):
            _fields_ = [f for f in _lib.RegionStruct._fields_ if f[0] != "arena"]
        saved, env = _lib.UNSTABLE_MIRRORS, os.environ.get("MAGI_AOT_LIB")
        os.environ["MAGI_AOT_LIB"] = self.path
        _lib.UNSTABLE_MIRRORS = ((Region, "magi_region", False),)
        try:
            fresh = _lib._Lib()
            with self.assertRaises(OSError) as cm:
                fresh.path
            self.assertIn("magi_region.flags", str(cm.exception))
            self.assertIsNone(fresh._dll)
        finally:
            _lib.UNSTABLE_MIRRORS = saved
            if env is None:
                del os.environ["MAGI_AOT_LIB"]
            else:
                os.environ["MAGI_AOT_LIB"] = env


if __name__ == "__main__":
    unittest.main()
