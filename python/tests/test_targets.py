"""Target names (magi_aot.fx.targets) and float expressions through the binding.

No torch: every target form the fx walk records is checked here on
stand-ins from the standard library (operator, math, builtins, method
descriptors, a function defined in a closure and exported under another
name); torch's own forms (pybind11 builtins, F.max_pool2d) are checked in
test_torch.py.
"""
import json
import math
import operator
import os
import sys
import tempfile
import textwrap
import unittest

from _util import ROOT, TORCH_REASON, torch_available

import magi_aot
from magi_aot.fx import expr as _expr
from magi_aot.fx.targets import name_of, resolve

FLOATS = os.path.join(ROOT, "fixtures", "floats", "item_scale.json")


class Targets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # a module whose public names are functions made in a closure, the
        # way torch.nn.functional exports max_pool2d from boolean_dispatch
        cls.tmp = tempfile.TemporaryDirectory()
        with open(os.path.join(cls.tmp.name, "magi_closure_mod.py"), "w") as f:
            f.write(textwrap.dedent("""
                def _dispatch(name):
                    def fn(x):
                        return x
                    fn.__module__ = __name__
                    fn.__name__ = name
                    return fn

                max_pool = _dispatch("max_pool")
                _private_only = _dispatch("_private_only")

                def local_only():
                    def inner():
                        return 1
                    return inner
                """))
        sys.path.insert(0, cls.tmp.name)
        import magi_closure_mod
        cls.mod = magi_closure_mod

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.tmp.name)
        sys.modules.pop("magi_closure_mod", None)
        cls.tmp.cleanup()

    def roundtrip(self, obj, want):
        name = name_of(obj)
        self.assertEqual(name, want)
        got = resolve(name)
        if isinstance(getattr(obj, "__self__", None), type):
            self.assertEqual(got, obj)      # a classmethod: bound on each access
        else:
            self.assertIs(got, obj)

    def test_operator_math_and_builtins(self):
        self.roundtrip(operator.mul, "operator.mul")          # _operator.mul
        self.roundtrip(operator.getitem, "operator.getitem")
        self.roundtrip(math.floor, "math.floor")
        self.roundtrip(math.sqrt, "math.sqrt")
        self.roundtrip(getattr, "builtins.getattr")
        self.roundtrip(len, "builtins.len")

    def test_methods_by_their_owner(self):
        self.roundtrip(str.join, "builtins.str.join")          # method descriptor
        self.roundtrip(int.__add__, "builtins.int.__add__")    # slot wrapper
        self.roundtrip(dict.fromkeys, "builtins.dict.fromkeys")  # classmethod of a builtin

    def test_closure_function_under_its_public_alias(self):
        fn = self.mod.max_pool
        self.assertIn("<locals>", fn.__qualname__)
        self.roundtrip(fn, "magi_closure_mod.max_pool")
        # a private alias is used when it is the only one
        self.roundtrip(self.mod._private_only, "magi_closure_mod._private_only")

    def test_unnamed_targets_are_none_and_refused_by_the_loader(self):
        inner = self.mod.local_only()
        self.assertIsNone(name_of(inner))
        with self.assertRaisesRegex(LookupError, "local to a function"):
            resolve("magi_closure_mod.local_only.<locals>.inner")
        self.assertIsNone(name_of(lambda x: x))
        self.assertIsNone(name_of([].append))                  # bound to an instance
        with self.assertRaisesRegex(LookupError, "no attribute path"):
            resolve("operator.no_such_function")
        with self.assertRaisesRegex(LookupError, "cannot import"):
            resolve("no_such_module_magi.f")
        with self.assertRaises(LookupError):
            resolve("")


class FloatExpressions(unittest.TestCase):
    def test_float_literals_and_functions_parse(self):
        self.assertEqual(_expr.parse("zuf0 > 0.0"), ("gt", (("sym", "zuf0"), ("float", 0.0))))
        self.assertEqual(_expr.parse("1.00000000000000e-5"), ("float", 1e-5))
        self.assertEqual(_expr.parse("-oo"), ("float", -math.inf))
        self.assertEqual(_expr.symbols(_expr.parse("FloatTrueDiv(ToFloat(s77), 3.0)")), ["s77"])

    def test_float_hints_evaluate(self):
        self.assertEqual(_expr.eval_int("FloorToInt(2.5*zf71*s77)", {"zf71": 0.5, "s77": 4}), 5)
        self.assertEqual(_expr.eval_int("CeilToInt(zf0)", {"zf0": -1.5}), -1)
        with self.assertRaises(magi_aot.MagiError) as cm:
            _expr.eval_int("FloorToInt(zuf0)", {"zuf0": None})
        self.assertEqual(cm.exception.status, "MAGI_ERR_UNBACKED")

    def test_float_region_loads_and_fingerprints_under_renaming(self):
        with open(FLOATS) as f:
            text = f.read()
        r = magi_aot.load(FLOATS, transport=None)
        self.assertEqual(r.symbols, {"s77": 4, "zf71": 0.5, "zuf0": None})
        renamed = text.replace("zf71", "zf3").replace("zuf0", "zuf12").replace("s77", "s5")
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "renamed.json")
            with open(p, "w") as f:
                f.write(renamed)
            art = os.path.join(d, "renamed.magi")
            magi_aot.save_doc(magi_aot.load(p, transport=None).doc, art)
            back = magi_aot.load(art, transport=None)
        self.assertEqual(back.symbols, {"s5": 4, "zf3": 0.5, "zuf12": None})
        self.assertEqual(back.fingerprint, r.fingerprint)
        self.assertNotEqual(magi_aot.fingerprint(r.doc), magi_aot.fingerprint(
            dict(r.doc, symbols=dict(r.doc["symbols"], zf71={"hint": 0.25}))))


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(torch_available(), TORCH_REASON)
class TorchTargets(unittest.TestCase):
    """torch's own forms: what the issue's real models recorded."""

    def test_torch_callables_round_trip(self):
        import torch
        import torch.nn.functional as F
        cases = [
            (F.max_pool2d, "torch.nn.functional.max_pool2d"),     # boolean_dispatch.<locals>.fn
            (F.adaptive_max_pool1d, "torch.nn.functional.adaptive_max_pool1d"),
            (torch._C._log_api_usage_once, "torch._C._log_api_usage_once"),  # pybind11
            (torch._C._nn.linear, "torch._C._nn.linear"),
            (torch.Tensor.add, "torch._C.TensorBase.add"),       # tensor method
            (torch.sym_max, "torch.sym_max"),
            (F.relu, "torch.nn.functional.relu"),
        ]
        for obj, want in cases:
            with self.subTest(want):
                self.assertEqual(name_of(obj), want)
                self.assertIs(resolve(want), obj)
        # torch's builtins of _VariableFunctionsClass resolve to themselves
        n = name_of(torch.scalar_tensor)
        self.assertIs(resolve(n), torch.scalar_tensor)

    def test_walk_records_resolvable_names_and_warns_for_the_rest(self):
        import torch
        import torch.fx as fx
        import torch.nn.functional as F
        from magi_aot.fx import UnresolvableTarget, graph_to_doc
        from magi_aot.fx.rebuild import resolve_target

        def local_helper(x):
            return x + 1

        g = fx.Graph()
        x = g.placeholder("x")
        a = g.call_function(F.max_pool2d, (x, 2))
        b = g.call_function(torch._C._log_api_usage_once, ("magi",))
        c = g.call_function(local_helper, (a,), name="helper")
        d = g.call_function(operator.getitem, (c, 0))
        g.output((d, b))
        gm = fx.GraphModule(torch.nn.Module(), g)
        with self.assertWarns(UnresolvableTarget) as cm:
            doc = graph_to_doc(gm, model_tag="t")
        self.assertIn("node 'helper'", str(cm.warning))
        targets = {n["name"]: n["target"] for n in doc["graph"]["nodes"]}
        self.assertEqual(targets["max_pool2d"], "torch.nn.functional.max_pool2d")
        self.assertEqual(targets["_log_api_usage_once"], "torch._C._log_api_usage_once")
        self.assertEqual(targets["getitem"], "operator.getitem")
        self.assertIs(resolve_target(targets["max_pool2d"]), F.max_pool2d)
        self.assertIn("<locals>", targets["helper"])


_EVIL_MOD = """
import os
with open(os.environ["MAGI_EVIL_MARKER"], "w") as f:
    f.write("imported")
def f(x):
    return x
"""


@unittest.skipUnless(torch_available(), TORCH_REASON)
class LoaderAllowList(unittest.TestCase):
    """A target string read from an artifact is data: the loader calls only
    what its allow-list names, and imports no module a name chose, unless
    the caller opts in."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.marker = os.path.join(cls.tmp.name, "marker")
        with open(os.path.join(cls.tmp.name, "magi_evil_mod.py"), "w") as f:
            f.write(_EVIL_MOD)
        sys.path.insert(0, cls.tmp.name)
        os.environ["MAGI_EVIL_MARKER"] = cls.marker

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.tmp.name)
        sys.modules.pop("magi_evil_mod", None)
        os.environ.pop("MAGI_EVIL_MARKER", None)
        cls.tmp.cleanup()

    def region(self, target, args, op="call_function"):
        """A region x -> target(*args) -> output, as an artifact would hold it."""
        import torch
        import torch.fx as fx
        from magi_aot.fx import graph_to_doc
        g = fx.Graph()
        x = g.placeholder("x")
        y = g.call_function(operator.add, (x, 1), name="node_under_test")
        g.output((y,))
        gm = fx.GraphModule(torch.nn.Module(), g)
        gm.graph.nodes.__iter__  # noqa: B018 - the graph as fx made it
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                n.meta["example_value"] = torch.empty(2, 3)
            if n.op == "call_function":
                n.meta["example_value"] = torch.empty(2, 3)
        doc = graph_to_doc(gm, model_tag="t")
        for n in doc["graph"]["nodes"]:
            if n["name"] == "node_under_test":
                n["op"], n["target"], n["args"] = op, target, args
        return magi_aot.region_from_doc(doc)

    def refused(self, target, args, op="call_function", word="refused", **kw):
        from unittest import mock
        r = self.region(target, args, op)
        with mock.patch("os.system") as system, mock.patch("subprocess.run") as run:
            with self.assertRaises(magi_aot.MagiError) as cm:
                r.graph_module(**kw)
        system.assert_not_called()
        run.assert_not_called()
        msg = cm.exception.message
        self.assertEqual(cm.exception.status, "MAGI_ERR_UNSUPPORTED")
        self.assertIn("node 'node_under_test'", msg)
        self.assertIn(word, msg)
        return msg

    def test_os_system_is_refused(self):
        from unittest import mock
        from magi_aot.fx.rebuild import run_fake
        msg = self.refused("os.system", ["echo pwned"])
        self.assertIn("os.system", msg)
        self.assertIn("allow_targets", msg)
        self.refused("posix.system", ["echo pwned"])
        self.refused("subprocess.run", [["true"]])
        r = self.region("os.system", ["echo pwned"])
        with mock.patch("os.system") as system:
            with self.assertRaises(magi_aot.MagiError):
                run_fake(r)
        system.assert_not_called()

    def test_no_module_named_by_data_is_imported(self):
        sys.modules.pop("magi_evil_mod", None)
        msg = self.refused("magi_evil_mod.f", [{"node": "x"}])
        self.assertIn("magi_evil_mod.f", msg)
        self.assertNotIn("magi_evil_mod", sys.modules)
        self.assertFalse(os.path.exists(self.marker), "the module named by the target was imported")
        # an operator namespace is not imported either: the operator is missing
        msg = self.refused("torch.ops.magi_evil_mod.f.default", [{"node": "x"}],
                           word="imported nothing")
        self.assertNotIn("magi_evil_mod", sys.modules)

    def test_what_is_not_an_operator_or_a_tensor_function(self):
        self.refused("torch.ops.load_library", ["/tmp/x.so"])
        self.refused("torch.ops.import_module", ["os"])
        self.refused("torch.load", ["/tmp/x.pt"])
        self.refused("torch.hub.load", ["a", "b"])
        self.refused("builtins.eval", ["1"])
        self.refused("builtins.exec", ["1"])
        self.refused("builtins.__import__", ["os"])
        self.refused("operator.attrgetter", ["__class__"])
        self.refused("operator.methodcaller", ["__reduce_ex__", 2])
        self.refused("torch._dynamo.polyfills.getattr_and_trace", [{"node": "x"}, "__class__"])
        # the steps from a value to arbitrary code
        self.refused("builtins.getattr", [{"node": "x"}, "__class__"])
        self.refused("__reduce_ex__", [{"node": "x"}, 2], op="call_method")
        self.refused("__class__", [{"node": "x"}], op="call_method")

    def chain(self, steps):
        """A region whose nodes are `steps` [(op, target, args)], each
        taking the previous node as {"node": "prev"}; x is the input."""
        import torch
        import torch.fx as fx
        from magi_aot.fx import graph_to_doc
        g = fx.Graph()
        x = g.placeholder("x")
        y = g.call_function(operator.add, (x, 1), name="n0")
        g.output((y,))
        gm = fx.GraphModule(torch.nn.Module(), g)
        for n in gm.graph.nodes:
            if n.op != "output":
                n.meta["example_value"] = torch.empty(2, 3)
        doc = graph_to_doc(gm, model_tag="t")
        nodes = doc["graph"]["nodes"]
        out = nodes.pop()
        proto = nodes.pop()
        prev = "x"
        for i, (op, target, args) in enumerate(steps):
            n = json.loads(json.dumps(proto))
            n.update(name="n%d" % i, op=op, target=target,
                     args=[{"node": prev} if a == "prev" else a for a in args])
            nodes.append(n)
            prev = n["name"]
        out["args"] = [[{"node": prev}]]
        nodes.append(out)
        return magi_aot.region_from_doc(doc)

    def test_no_method_leads_to_a_file_write(self):
        # torch.tensor(bytes).numpy().tofile(PATH): one allowed target and
        # two public methods wrote any file the user can write when the
        # graph ran eagerly
        path = os.path.join(self.tmp.name, "written.pth")
        payload = list(b"import os\n")
        r = self.chain([("call_function", "torch.tensor", [payload]),
                        ("call_method", "numpy", ["prev"]),
                        ("call_method", "tofile", ["prev", path])])
        with self.assertRaises(magi_aot.MagiError) as cm:
            r.graph_module()
        self.assertIn("call_method 'numpy'", cm.exception.message)
        self.assertIn("node 'n1'", cm.exception.message)
        self.assertFalse(os.path.exists(path))
        # the method alone, on whatever value, is off the list too
        r = self.chain([("call_method", "tofile", ["prev", path])])
        with self.assertRaises(magi_aot.MagiError) as cm:
            r.graph_module()
        self.assertIn("call_method 'tofile'", cm.exception.message)
        # a bound method fetched by getattr and handed to a function that
        # calls its argument (functools.reduce(f, [a], b) is f(b, a))
        r = self.chain([("call_function", "builtins.getattr", ["prev", "add_"]),
                        ("call_function", "functools.reduce", ["prev", [1], 2])])
        with self.assertRaises(magi_aot.MagiError) as cm:
            r.graph_module()
        self.assertIn("builtins.getattr of 'add_'", cm.exception.message)
        for op, target in [("call_method", "apply_"), ("call_method", "register_hook"),
                           ("call_method", "untyped_storage"), ("call_method", "format"),
                           ("call_function", "torch.Tensor.numpy"),
                           ("call_function", "torch._C.TensorBase.apply_")]:
            with self.subTest(target):
                with self.assertRaises(magi_aot.MagiError):
                    self.chain([(op, target, ["prev"])]).graph_module()
        self.assertFalse(os.path.exists(path))

    def test_the_list_still_rebuilds_what_graphs_hold(self):
        import torch
        for target, args in [("operator.mul", [{"node": "x"}, 2]),
                             ("torch._C._nn.linear", [{"node": "x"}, {"node": "x"}]),
                             ("torch.nn.functional.silu", [{"node": "x"}]),
                             ("torch._VariableFunctionsClass.rsqrt", [{"node": "x"}]),
                             ("torch.ops.aten.relu.default", [{"node": "x"}]),
                             ("torch._C.TensorBase.add", [{"node": "x"}, 1]),
                             ("builtins.getattr", [{"node": "x"}, "shape"]),
                             ("builtins.getattr", [{"node": "x"}, "dtype"])]:
            with self.subTest(target):
                self.region(target, args).graph_module()
        gm = self.region("__add__", [{"node": "x"}, 1], op="call_method").graph_module()
        self.assertTrue(torch.equal(gm(torch.ones(2, 3))[0], torch.full((2, 3), 2.0)))

    def test_opt_in(self):
        sys.modules.pop("magi_evil_mod", None)
        r = self.region("magi_evil_mod.f", [{"node": "x"}])
        gm = r.graph_module(allow_targets=["magi_evil_mod"])
        self.assertTrue(os.path.exists(self.marker))
        self.assertIn("magi_evil_mod", sys.modules)
        os.unlink(self.marker)
        old = os.environ.get("MAGI_AOT_ALLOW_TARGETS")
        os.environ["MAGI_AOT_ALLOW_TARGETS"] = "magi_evil_mod.f"
        try:
            r.graph_module()
        finally:
            if old is None:
                del os.environ["MAGI_AOT_ALLOW_TARGETS"]
            else:
                os.environ["MAGI_AOT_ALLOW_TARGETS"] = old
        self.assertIsNotNone(gm)
