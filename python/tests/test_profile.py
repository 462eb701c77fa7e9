"""The cost-table profiler (magi_aot.profile) on the CPU: the table format
and its checks, keys taken from the C library, the table accepted by
`magi-aot costs/schedule --costs`, gathers written under both the NCCL and
the copy-engine key with their issue:KEY, unbacked symbols sized as the
analytical model assumes. (On a GPU: python/tests/gpu/profile_costs.sh.)"""
import json
import math
import os
import subprocess
import tempfile
import unittest

from _util import TORCH_REASON, fixture, torch_available

from magi_aot import profile as prof


def _cli():
    return os.environ.get("MAGI_CLI")


class Table(unittest.TestCase):
    def test_medians_and_validation(self):
        t = prof.build_table({"a": [3.0, 1.0, 2.0], "b": [4.0, 2.0], "issue:a": [0.5]})
        self.assertEqual(t, {"a": 2.0, "b": 3.0, "issue:a": 0.5})
        for bad in ({"a": [-1.0]}, {"a": [math.nan]}, {"a": [math.inf]}, {"a": []}, {"": [1.0]}, {"a": ["1"]}):
            with self.assertRaises(ValueError):
                prof.build_table(bad)

    def test_written_table_is_read_by_the_cli(self):
        if not _cli():
            self.skipTest("MAGI_CLI not set (CTest sets it)")
        keys = prof.node_keys(fixture("block"))
        some = sorted({k for k in keys if k})[:3]
        self.assertTrue(some)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.write_table(path, {k: 7.0 for k in some})
            with open(path) as f:
                doc = json.load(f)
            self.assertEqual(doc["format"], "magi-cost-table")
            self.assertEqual(sorted(doc["costs"]), some)
            self.assertEqual(os.listdir(d), ["t.json"])  # no temporary left behind
            rep = json.loads(subprocess.run([_cli(), "costs", fixture("block"), "--costs", path, "--json"],
                                            check=True, stdout=subprocess.PIPE).stdout)
            n_meas = sum(1 for n in rep["nodes"] if n["source"] == "measured")
            self.assertEqual(n_meas, sum(1 for k in keys if k in some))
            self.assertTrue(all(n["cost_us"] == 7.0 for n in rep["nodes"] if n["source"] == "measured"))
            # a bad value is refused before anything is written
            with self.assertRaises(ValueError):
                prof.write_table(path, {"a": -1.0})
            with open(path) as f:
                self.assertEqual(json.load(f), doc)


@unittest.skipUnless(torch_available(), TORCH_REASON)
class Measure(unittest.TestCase):
    def setUp(self):
        if not _cli():
            self.skipTest("MAGI_CLI not set (CTest sets it)")

    def test_gathers_and_compute_on_cpu(self):
        # two gathers (a single and a coalesced one) and two compute nodes of fsdp_block
        only = {"tensor", "all_gather_into_tensor_coalesced", "h", "silu"}
        measured, report = prof.profile(fixture("fsdp_block"), device="cpu", iters=1, only=only)
        rows = {r["name"]: r for r in report}
        for name in only:
            self.assertIsNotNone(rows[name]["us"], rows[name]["method"])
            self.assertIn(rows[name]["key"], measured)
        g = rows["tensor"]
        self.assertTrue(g["key"].startswith("collective:torch.ops._c10d_functional.all_gather_into_tensor("))
        self.assertIn("issue:" + g["key"], measured)
        # the copy-engine rewrite's key of the same node, with its issue cost
        self.assertTrue(g["symm_key"] and "magi.symm_all_gather" in g["symm_key"], g["symm_key"])
        self.assertIn(g["symm_key"], measured)
        self.assertIn("issue:" + g["symm_key"], measured)
        self.assertTrue(rows["res"]["method"].startswith("not measured"))
        # the scheduler takes the table: measured costs for exactly these keys
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.write_table(path, prof.build_table(measured))
            rep = json.loads(subprocess.run([_cli(), "schedule", fixture("fsdp_block"), "--costs", path, "--json"],
                                            check=True, stdout=subprocess.PIPE).stdout)
            self.assertEqual(rep["estimator"]["source"], "measured")
            cost = {x["node"]: x for x in rep["gathers"]}
            self.assertAlmostEqual(cost["tensor"]["cost_us"], prof.build_table(measured)[g["key"]], places=2)

    def test_unbacked_sizes_follow_the_model(self):
        # cp_a2a: the matmul runs at u0+..+u3 = 64 rows, the value the analytical model assumes
        self.assertEqual(prof.unbacked_values(fixture("cp_a2a")), {"u0": 16, "u1": 16, "u2": 16, "u3": 16})
        measured, report = prof.profile(fixture("cp_a2a"), device="cpu", iters=1, only={"matmul"})
        row = next(r for r in report if r["name"] == "matmul")
        self.assertIsNotNone(row["us"], row["method"])
        self.assertEqual(list(measured), [row["key"]])


if __name__ == "__main__":
    unittest.main()


class OperatorTable(unittest.TestCase):
    """The package asks the library's operator table (magi_aot.optable)
    instead of keeping its own lists: the profiler skips exactly what the
    table calls free or a wait, and the runtime finds groups only on
    collectives."""

    def test_classes(self):
        from magi_aot.optable import classify, is_gather
        f = "call_function"
        self.assertEqual(classify(f, "torch.ops._c10d_functional.all_gather_into_tensor.default"), "gather")
        self.assertEqual(classify(f, "torch.ops.magi.symm_all_gather_coalesced"), "symm_gather")
        self.assertEqual(classify(f, "torch.ops._c10d_functional.wait_tensor"), "wait")
        self.assertEqual(classify(f, "torch.ops._c10d_functional.all_reduce"), "collective")
        self.assertEqual(classify(f, "operator.getitem"), "free")
        self.assertEqual(classify("call_method", "view"), "free")
        self.assertEqual(classify("call_method", "contiguous"), "compute")  # may copy: priced, so measured
        self.assertEqual(classify(f, "torch.matmul"), "compute")
        self.assertEqual(classify("placeholder", "x"), "free")
        self.assertTrue(is_gather(f, "torch.ops.magi.symm_all_gather"))
        self.assertFalse(is_gather(f, "torch.ops._c10d_functional.all_reduce"))
        with self.assertRaises(ValueError) as cm:
            classify("call_everything", "x")
        self.assertIn("call_everything", str(cm.exception))

    def test_profiler_and_runtime_follow_the_table(self):
        from magi_aot.optable import classify
        from magi_aot import runtime
        for name in ("block", "fsdp_block", "mixed", "cp_a2a"):
            with open(fixture(name)) as fh:
                doc = json.load(fh)
            for n in doc["graph"]["nodes"]:
                why = prof._skip_reason(n)
                if n["op"] in ("placeholder", "output", "get_attr"):
                    self.assertEqual(why, "no key")
                    continue
                cls = classify(n["op"], n.get("target") or "")
                with self.subTest(fixture=name, node=n["name"], cls=cls, why=why):
                    self.assertEqual(why is None, cls in ("compute", "gather", "symm_gather"))
                    if cls in ("free", "wait"):
                        self.assertTrue(why.startswith("free by the model"))
        with open(fixture("fsdp_block")) as fh:
            self.assertEqual(runtime._collective_groups([json.load(fh)]), {"0": 4, "1": 2})
