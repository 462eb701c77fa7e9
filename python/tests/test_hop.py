"""Higher-order operators: flex attention's score_mod / mask_mod and
torch.cond's branches saved with their region as subgraphs, loaded (here
and in a fresh interpreter), rebuilt by graph_module() and run on CPU with
the output the original gives.

They need PyTorch and skip with a reason where it is not importable.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

from _util import HERE, ROOT, TORCH_REASON, torch_available

HAVE_TORCH = torch_available()


def _models():
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def causal(b, h, q, kv):
        return q >= kv

    block_mask = create_block_mask(causal, 1, 1, 128, 128, device="cpu")

    class Flex(torch.nn.Module):
        def __init__(self, slope):
            super().__init__()
            self.slope = slope

        def forward(self, q, k, v):
            slope = self.slope

            def score_mod(score, b, h, q_idx, kv_idx):
                return score + (q_idx - kv_idx) * slope

            return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t.sin() * 2, lambda t: t.cos() + 1, (x,))

    class NestedCond(torch.nn.Module):
        def forward(self, x):
            def outer_true(t):
                return torch.cond(t.mean() > 0.5, lambda u: u * 3, lambda u: u - 3, (t,))

            return torch.cond(x.sum() > 0, outer_true, lambda t: t.cos(), (x,))

    return Flex, Cond, NestedCond


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class HigherOrderOps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        import magi_aot
        cls.torch, cls.magi = torch, magi_aot
        cls.Flex, cls.Cond, cls.NestedCond = _models()

    def setUp(self):
        self.torch._dynamo.reset()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.cache = os.path.join(self.tmp.name, "cache")

    def _trace(self, model, args, tag):
        """(GraphModule, example inputs, cache entry) of the one region."""
        torch = self.torch
        backend = self.magi.save_backend(self.cache, tag, strict=True)
        seen = []

        def capture(gm, example_inputs):
            seen.append((gm, list(example_inputs)))
            return backend(gm, example_inputs)

        fn = torch.compile(model, backend=capture, fullgraph=True)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # flex attention's unfused eager path says so
            fn(*args)
        self.assertEqual(len(seen), 1)
        self.assertEqual(len(backend.entries), 1)
        self.assertIsNone(backend.entries[0].error)
        return seen[0][0], seen[0][1], backend.entries[0]

    def _run_rebuilt(self, region, inputs):
        gm = region.graph_module()
        with self.torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = gm(*inputs)
        return out[0] if isinstance(out, (tuple, list)) else out

    def _check_same_process(self, model, args, tag, subgraphs=None):
        from magi_aot.cache import cache_get
        torch = self.torch
        gm, inputs, ent = self._trace(model, args, tag)
        doc = self.magi.graph_to_doc(gm, model_tag=tag)
        if subgraphs is not None:
            self.assertEqual(sorted(doc.get("subgraphs", {})), subgraphs)
        self.assertEqual(self.magi.fx.rebuild_problems(doc), [])
        region = cache_get(self.cache, ent.key)
        self.assertEqual(sorted(region.doc.get("subgraphs") or {}), sorted(doc.get("subgraphs", {})))
        self.assertEqual(region.fingerprint, ent.fingerprint)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = model(*args)
        got = self._run_rebuilt(region, inputs)
        self.assertTrue(torch.equal(got, want), (got - want).abs().max())
        return gm, inputs, ent, doc

    def test_flex_attention_rebuilt_in_another_process(self):
        torch = self.torch
        torch.manual_seed(0)
        args = tuple(torch.randn(1, 2, 128, 16) for _ in range(3))
        model = self.Flex(0.25)
        gm, inputs, ent, doc = self._check_same_process(model, args, "flex", ["mask_fn_0", "score_mod_0"])
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = model(*args)
        saved = os.path.join(self.tmp.name, "io.pt")
        torch.save({"inputs": inputs, "want": want}, saved)
        code = ("import sys, json, warnings; sys.path[:0] = [%r, %r]\n"
                "warnings.simplefilter('ignore')\n"
                "import torch, magi_aot\n"
                "from magi_aot.cache import cache_get\n"
                "r = cache_get(%r, %r)\n"
                "io = torch.load(%r)\n"
                "with torch.no_grad():\n"
                "    out = r.graph_module()(*io['inputs'])\n"
                "out = out[0] if isinstance(out, (tuple, list)) else out\n"
                "print(json.dumps({'fp': r.fingerprint, 'subgraphs': sorted(r.doc.get('subgraphs') or {}),\n"
                "                  'equal': bool(torch.equal(out, io['want']))}))"
                % (HERE, os.path.join(ROOT, "python"), self.cache, ent.key, saved))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual(got, {"fp": ent.fingerprint, "subgraphs": ["mask_fn_0", "score_mod_0"],
                               "equal": True})

        # a change inside score_mod alone changes the fingerprint
        self.torch._dynamo.reset()
        _, _, other, _ = self._check_same_process(self.Flex(0.5), args, "flex2",
                                                  ["mask_fn_0", "score_mod_0"])
        self.assertNotEqual(other.fingerprint, ent.fingerprint)

    def test_cond_rebuilt_and_both_branches_run(self):
        torch = self.torch
        x = torch.randn(4, 8).abs()
        gm, inputs, ent, doc = self._check_same_process(self.Cond(), (x,), "cond",
                                                        ["cond_false_0", "cond_true_0"])
        from magi_aot.cache import cache_get
        region = cache_get(self.cache, ent.key)
        neg = [-t for t in inputs]  # the other branch, through the same rebuilt module
        self.assertTrue(torch.equal(self._run_rebuilt(region, neg), self.Cond()(-x)))

    def test_nested_cond(self):
        torch = self.torch
        torch.manual_seed(0)
        x = torch.rand(4, 8) + 0.6
        gm, inputs, ent, doc = self._check_same_process(self.NestedCond(), (x,), "nested")
        # the outer cond's branches keep their names; the inner cond's are
        # named under the outer true branch, and its get_attr targets say so
        names = sorted(doc["subgraphs"])
        top = [k for k in names if "." not in k]
        self.assertEqual(len(names), 4, names)
        self.assertEqual(len(top), 2, names)
        outer_true = next(k for k in top if k.startswith("cond_true"))
        inner = [k for k in names if "." in k]
        self.assertTrue(all(k.startswith(outer_true + ".") for k in inner), names)
        targets = [n["target"] for n in doc["subgraphs"][outer_true]["nodes"] if n["op"] == "get_attr"]
        self.assertEqual(sorted(targets), inner)
        from magi_aot.cache import cache_get
        region = cache_get(self.cache, ent.key)
        for t in (x, x - 0.9, -x):  # every branch of both conds
            self.assertTrue(torch.equal(self._run_rebuilt(region, [t]), self.NestedCond()(t)))

    def test_rebuild_problems(self):
        torch = self.torch
        x = torch.randn(4, 8)
        gm, _, _ = self._trace(self.Cond(), (x,), "cond")
        doc = self.magi.graph_to_doc(gm, model_tag="cond")
        self.assertEqual(self.magi.fx.rebuild_problems(doc), [])
        # a get_attr naming no saved subgraph is still reported
        del doc["subgraphs"]["cond_false_0"]
        problems = self.magi.fx.rebuild_problems(doc)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("node 'cond_false_0': get_attr cond_false_0 needs the module's attributes", problems[0])
        with self.assertRaisesRegex(self.magi.MagiError, "cond_false_0"):
            self.magi.region_from_doc(doc).graph_module()


if __name__ == "__main__":
    unittest.main()
