"""torchtitan's SimpleFSDP in CI (CPU, gloo): titan_e2e.py's save in rank
processes and load in fresh rank processes, three ways that together cover
fp32 and torchtitan's bf16 policy, even and uneven vocabularies, 2 and 4
ranks, the cast and pad at bind and the seed-exact option. Runs with the
installed torchtitan (0.3.0 in CI; 0.2.2 too, the release the GPU machine's
torch 2.11 takes), and the adapter titan_model.py picks for it is checked
without processes (TitanAdapter).
Needs torchtitan (python/requirements-titan.txt; scripts/pyenv.sh installs it)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _have_torchtitan():
    """Installed (not imported: 0.2.2's package imports triton, which
    titan_model stands in for where it is absent)."""
    import importlib.util
    return importlib.util.find_spec("torchtitan") is not None


def _rank_reports(out, phase):
    """{rank: report} from titan_e2e's 'titan_e2e PHASE rank N: {...}' lines."""
    got = {}
    for line in out.splitlines():
        head, sep, tail = line.partition(": ")
        parts = head.split()
        if sep and len(parts) == 4 and parts[:2] == ["titan_e2e", phase] and parts[2] == "rank":
            got[int(parts[3])] = json.loads(tail)
    return got


@unittest.skipUnless(_have_torchtitan() or os.environ.get("MAGI_REQUIRE_TORCH"),
                     "torchtitan is not installed (pip install --no-deps -r python/requirements-titan.txt)")
class TorchtitanSimpleFSDP(unittest.TestCase):
    def _e2e(self, *args):
        with tempfile.TemporaryDirectory(prefix="magi-titan-") as d:
            p = subprocess.run([sys.executable, os.path.join(HERE, "titan_e2e.py"), "--out", d] + list(args),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        print(p.stdout[-4000:])
        self.assertEqual(p.returncode, 0, p.stdout[-4000:])
        self.assertIn("titan_e2e: PASS", p.stdout)
        return p.stdout

    def test_fp32_even_two_ranks(self):
        """fp32, vocab 1000 over 2 ranks: every gather rewritten, bit-exact
        against the compiled original and against the unsharded model.
        Then SymmRuntime.compile of the same region (its attention records
        the SDPA backend calls, which Inductor's graph cache has to take
        for the code to be stored): compiled by fresh rank processes,
        served from the cache directory by others, within Inductor's
        tolerance of the compiled original."""
        out = self._e2e("--world", "2", "--vocab", "1000", "--mp", "fp32", "--runs", "bind,code,code_again")
        self.assertIn('"bit_exact_unsharded": true', out)
        first, again = _rank_reports(out, "run_code"), _rank_reports(out, "run_code_again")
        self.assertEqual(sorted(first), [0, 1], out[-4000:])
        self.assertEqual(sorted(again), [0, 1], out[-4000:])
        for r in (0, 1):
            self.assertEqual(first[r]["served"], "compiled", first[r])
            self.assertEqual(again[r]["served"], "stored", again[r])
            self.assertTrue(again[r]["within_tol"], again[r])

    def test_inductor_keeps_the_schedule_two_ranks(self):
        """The tiny Llama3 on 2 ranks through the documented path: the
        runtime schedules the region (one schedule on both ranks, within
        its memory bound); compile_fx with Inductor's defaults queues
        compute under every gather from the first layer's attention on,
        the output projection included. torchtitan gathers the embedding
        twice, once for an attribute access nothing reads: the runtime's
        graph leaves that one out. The first three gathers left precede
        the region's first kernel: Inductor fuses the embedding lookup into
        the first RMSNorm, which needs the norm's weight, and the fused qkv
        projection follows it directly. The result is the unscheduled
        compile's, bit for bit."""
        out = self._e2e("--world", "2", "--vocab", "1000", "--mp", "fp32", "--inductor")
        reports = _rank_reports(out, "run_bind")
        self.assertEqual(sorted(reports), [0, 1], out[-4000:])
        for r, rep in reports.items():
            self.assertEqual(rep["schedule_mode"], "identical", (r, rep))
            self.assertGreater(rep["schedule_moved"], 0, (r, rep))
            self.assertTrue(rep["schedule_within_bound"], (r, rep))
            self.assertTrue(rep["inductor_matches_unscheduled"], (r, rep))
        kernels = reports[0]["inductor_overlap"]
        self.assertEqual(len(kernels), reports[0]["gathers"] - 1, reports[0])
        self.assertTrue(all(k > 0 for k in kernels[3:]), kernels)

    def test_bf16_uneven_four_ranks_cast_and_pad_at_bind(self):
        """torchtitan's bf16 policy, vocab 1001 over 4 ranks (251/251/251/248):
        every gather leaves NCCL with its cast and pad done once at bind."""
        import titan_model as tm
        out = self._e2e("--world", "4", "--vocab", "1001", "--mp", "bf16")
        reports = _rank_reports(out, "run_bind")
        self.assertEqual(sorted(reports), [0, 1, 2, 3], out[-4000:])
        for r, rep in reports.items():
            # one lowered redistribute per weight use: every one cast at bind
            self.assertGreaterEqual(rep["redistributes"], tm.weight_count(), (r, rep))
            self.assertEqual(rep["at_bind"], rep["redistributes"], (r, rep))
            self.assertEqual(rep["rewritten"], rep["gathers"], (r, rep))

    def test_bf16_uneven_seed_exact(self):
        """keep_cast_pad: MagiCompiler's form, casts and pads kept on c10d
        with their reasons, the same plan on every rank."""
        out = self._e2e("--world", "2", "--vocab", "1001", "--mp", "bf16", "--keep-cast-pad")
        self.assertIn('"kept": ["cast", "pad"]', out)


class TitanAdapter(unittest.TestCase):
    """titan_model's adapter without processes or torchtitan: which release
    a version gets, and the stand-in modules for packages only torchtitan's
    trainer imports."""

    def _with_version(self, v):
        import titan_model as tm
        saved = tm.titan_version
        tm.titan_version = lambda: v
        try:
            return tm._adapter()
        finally:
            tm.titan_version = saved

    def test_release_by_version(self):
        import titan_model as tm
        self.assertIsInstance(self._with_version("0.3.0"), tm._Titan030)
        self.assertIsInstance(self._with_version("0.4.1.dev0"), tm._Titan030)
        self.assertIsInstance(self._with_version("0.2.2"), tm._Titan022)
        for v in ("0.1.0", "1", "nightly"):
            with self.assertRaises(RuntimeError) as cm:
                self._with_version(v)
            self.assertIn(v, str(cm.exception))

    def test_forward_args_by_release(self):
        """0.3.0's Decoder.forward(tokens, positions, attention_masks);
        0.2.2's Transformer.forward(tokens, attention_masks, positions)."""
        import titan_model as tm
        self.assertEqual(tm._Titan030().forward_args("T", "M"), ("T", None, "M"))
        self.assertEqual(tm._Titan022().forward_args("T", "M"), ("T", "M"))
        for ad in (tm._Titan030(), tm._Titan022()):
            self.assertEqual(ad.forward_args("T", None), ("T",))

    def test_stand_in_module(self):
        import importlib
        import importlib.util
        import titan_model as tm
        name = "magi_titan_absent_pkg"
        self.assertTrue(tm._absent(name))
        tm._stand_in(name, "why it is absent")
        tm._stand_in(name + ".sub", "why it is absent")
        try:
            from magi_titan_absent_pkg.sub import SomeLoader, some_kernel
            self.assertIsNotNone(importlib.util.find_spec(name))  # no ValueError
            self.assertFalse(tm._absent(name))
            with self.assertRaises(RuntimeError) as cm:
                some_kernel(1, 2)
            self.assertIn("magi_titan_absent_pkg.sub.some_kernel: why it is absent", str(cm.exception))
            self.assertFalse(isinstance(object(), SomeLoader))

            class Sub(SomeLoader):  # a base class at import, as torchtitan's loaders use them
                pass
            with self.assertRaises(RuntimeError):
                Sub()
            mod = importlib.import_module(name)
            with self.assertRaises(AttributeError):
                mod.__wrapped__
            self.assertIs(mod.sub, sys.modules[name + ".sub"])
        finally:
            sys.modules.pop(name + ".sub", None)
            sys.modules.pop(name, None)

    def test_stand_ins_only_where_absent(self):
        """A package that is installed (json, posing as triton) keeps its
        modules; every module of an absent one is stood in, the absence
        decided before the first stand-in (which would make the package
        look present)."""
        import titan_model as tm
        names = ["magi_titan_gone", "magi_titan_gone.distributed", "magi_titan_kernels"]
        try:
            got = tm._install_stand_ins([
                ("json", ["magi_titan_kernels"], "json is not installed"),
                ("magi_titan_gone", names[:2], "magi_titan_gone is not installed")])
            self.assertEqual(got, names[:2])
            self.assertNotIn("magi_titan_kernels", sys.modules)
            from magi_titan_gone.distributed import split  # noqa: F401
        finally:
            for n in names:
                sys.modules.pop(n, None)
        # 0.2.2's llama3 imports the trainer: its data set and logging packages
        self.assertEqual({p for p, _, _ in tm._Titan022.stand_ins},
                         {"triton", "datasets", "tensorboard"})


@unittest.skipUnless(_have_torchtitan() or os.environ.get("MAGI_REQUIRE_TORCH"),
                     "torchtitan is not installed (pip install --no-deps -r python/requirements-titan.txt)")
class TorchtitanMoERegions(unittest.TestCase):
    """titan_moe_regions.py: torchtitan's Qwen3 MoE under plain
    torch.compile with graph breaks (regions that start inside the
    embedding, the final norm, the output projection and each MoE block,
    whose weights Dynamo names from the submodule), every region in one
    SymmRuntime on 2 ranks: one slot per distinct weight, each named by its
    path from the model's root, every gather (dense and expert) rewritten,
    every region bit-exact with its compiled run."""

    def test_regions_of_one_model_in_one_runtime(self):
        with tempfile.TemporaryDirectory(prefix="magi-moe-") as d:
            p = subprocess.run([sys.executable, os.path.join(HERE, "titan_moe_regions.py"), "--out", d,
                                "--world", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=900)
            self.assertEqual(p.returncode, 0, p.stdout[-6000:])
            for r in range(2):
                with open(os.path.join(d, "rank%d.run.json" % r)) as f:
                    res = json.load(f)
                with self.subTest(rank=r):
                    self.assertGreaterEqual(res["regions"], 5)
                    self.assertTrue(all(res["bit_exact"]), res["bit_exact"])
                    # three regions whose weight Dynamo calls L_self_parameters_weight_: three slots
                    for w in ("tok_embeddings", "norm", "lm_head"):
                        self.assertIn("L_self_modules_%s_parameters_weight_" % w, res["slot_weights"])
                    self.assertNotIn("L_self_parameters_weight_", res["slot_weights"])
                    self.assertEqual(res["slots"], len(set(res["slot_weights"])))
                    self.assertTrue(res["weights_named_once"])
                    self.assertTrue(any("inner_experts.w1" in m for m in res["module_paths"]))
                    self.assertEqual(res["rewritten"], res["gathers"])


if __name__ == "__main__":
    unittest.main()
