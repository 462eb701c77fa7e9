"""torchtitan's SimpleFSDP in the layouts past one node and past dense
models (CI, CPU, gloo, 4 rank processes each): HSDP on a 2 x 2 mesh in
fp32 and bf16, and the tiny Qwen3 MoE with experts parallel over 2 ranks
and sharded over efsdp 2, on their rows and (fewer experts than efsdp x ep)
on their columns. titan_e2e.py's save and run; every gather lowered,
rewritten to the copy engine and bit-exact. Needs torchtitan
(python/requirements-titan.txt)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import titan_ci  # noqa: E402  (its driver; not its test classes, which titan_ci runs)
from titan_ci import _have_torchtitan, _rank_reports  # noqa: E402


@unittest.skipUnless(_have_torchtitan() or os.environ.get("MAGI_REQUIRE_TORCH"),
                     "torchtitan is not installed (pip install --no-deps -r python/requirements-titan.txt)")
class TorchtitanLayouts(unittest.TestCase):
    """HSDP and expert-parallel layouts on 4 gloo ranks: every gather on
    the copy engine, bit-exact."""

    def _run(self, *args):
        out = titan_ci.TorchtitanSimpleFSDP._e2e(self, "--world", "4", *args)
        reports = _rank_reports(out, "run_bind")
        self.assertEqual(sorted(reports), [0, 1, 2, 3], out[-4000:])
        for r, rep in reports.items():
            self.assertTrue(rep["bit_exact_compiled"], (r, rep))
            self.assertEqual(rep["lowered"], rep["redistributes"], (r, rep))
            self.assertEqual(rep["rewritten"], rep["gathers"], (r, rep))
            self.assertEqual(rep["mesh_inputs"], [], (r, rep))
        return out, reports

    def _hsdp(self, mp):
        """(Replicate(), Shard(0)) on 2 x 2: one gather per weight use on
        the shard dimension's group (2 ranks), none on the replicas'."""
        import titan_model as tm
        out, reports = self._run("--layout", "hsdp", "--vocab", "1001", "--mp", mp)
        for r, rep in reports.items():
            self.assertGreaterEqual(rep["redistributes"], tm.weight_count(), (r, rep))
            self.assertEqual(len(rep["groups"]), 1, (r, rep))  # the shard dimension's group only
            self.assertEqual(rep["shard_group_size"], 2, (r, rep))
        return reports

    def test_hsdp_fp32(self):
        for r, rep in self._hsdp("fp32").items():
            self.assertTrue(rep["bit_exact_unsharded"], (r, rep))

    def test_hsdp_bf16(self):
        for r, rep in self._hsdp("bf16").items():
            self.assertEqual(rep["at_bind"], rep["redistributes"], (r, rep))

    def test_moe_ep2_efsdp2(self):
        """Qwen3 MoE, experts parallel over 2 ranks and sharded Shard(0)
        over efsdp 2: the 6 re-wrapped expert gathers (w1, w2, w3, twice
        each) and the dense ones all rewritten, bit-exact, against the
        unsharded model too."""
        out, reports = self._run("--layout", "moe", "--mp", "fp32")
        for r, rep in reports.items():
            self.assertEqual(rep["rewrapped"], 6, (r, rep))
            self.assertEqual(rep["column"], 0, (r, rep))
            self.assertTrue(rep["bit_exact_unsharded"], (r, rep))

    def test_moe_one_artifact_without_groups(self):
        """The region rank 0 saved, loaded by every rank with no groups=:
        the efsdp groups (the expert mesh's outer dimension, ranks 2 apart)
        and the all-to-all's ep groups are placed from the mesh the region
        records; every gather rewritten, bit-exact on every rank."""
        out, reports = self._run("--layout", "moe", "--mp", "fp32", "--one-artifact")
        for r, rep in reports.items():
            self.assertEqual(rep["rewrapped"], 6, (r, rep))
            self.assertTrue(rep["bit_exact_unsharded"], (r, rep))

    def test_moe_columns(self):
        """2 experts, fewer than efsdp x ep: torchtitan shards them
        Shard(1); each is a column gather, rewritten, bit-exact."""
        out, reports = self._run("--layout", "moe_col", "--mp", "fp32")
        for r, rep in reports.items():
            self.assertEqual(rep["rewrapped"], 6, (r, rep))
            self.assertEqual(rep["column"], 6, (r, rep))
            self.assertTrue(rep["bit_exact_unsharded"], (r, rep))


if __name__ == "__main__":
    unittest.main()
