"""Real transformers models through the whole path on CPU (tests/zoo.py;
CTest test_python_zoo, kept out of test_python's discovery so its compile
time has its own budget):
tiny configs with random weights, traced with the save backend with dynamic
batch and sequence, reloaded in a fresh process, rebuilt and run on fake
inputs; placeholders, outputs and fingerprint equal what Dynamo saw, every
region. Also: the save backend keeps nothing of the inputs it was handed.

Needs torch and transformers (CI installs both); skips with a reason where
either is missing. torchvision models run in gpu/zoo.py only.
"""
import gc
import os
import tempfile
import unittest
import weakref

from _util import TORCH_REASON, torch_available

HAVE_TORCH = torch_available()
try:
    import transformers  # noqa: F401
    HAVE_TF = True
except Exception:  # noqa: BLE001
    HAVE_TF = False


@unittest.skipUnless(HAVE_TORCH and HAVE_TF, TORCH_REASON + " (or transformers is missing)")
class Zoo(unittest.TestCase):
    def test_transformers_models_every_region(self):
        import zoo
        with tempfile.TemporaryDirectory() as tmp:
            cache = os.path.join(tmp, "cache")
            rows = []
            for name in zoo.CPU_CI:
                got, _ = zoo.trace(name, cache)
                self.assertGreaterEqual(len(got), 1, name)
                rows += got
            families = {r["family"] for r in rows}
            self.assertEqual(families, {"decoder", "moe", "encoder", "encdec"})
            # dynamic batch and sequence reached the saved regions
            for r in rows:
                dims = [d for p in r["placeholders"] if p["meta"]["kind"] == "tensor"
                        for d in p["meta"]["shape"]]
                self.assertTrue(any("e" in d for d in dims), "%s: no symbolic dim" % r["model"])
            results = zoo.check_elsewhere(cache, rows, tmp)
        self.assertEqual(len(results), len(rows))
        for res in results:
            with self.subTest(model=res["model"], region=res["region"]):
                self.assertEqual(res["problems"], [])

    def test_save_backend_keeps_nothing_of_the_inputs(self):
        import torch
        import magi_aot
        import torchcheck
        torch._dynamo.reset()
        refs = []

        class Spy:
            """Takes a weakref of every real tensor Dynamo hands the backend."""

            def __init__(self, inner):
                self.inner = inner

            def __call__(self, gm, example_inputs):
                for t in example_inputs:
                    if isinstance(t, torch.Tensor):
                        refs.append(weakref.ref(t))
                return self.inner(gm, example_inputs)

        with tempfile.TemporaryDirectory() as tmp:
            backend = magi_aot.save_backend(os.path.join(tmp, "cache"), "block", strict=True)
            model = torchcheck.Block(d=32, heads=4, ffn=64)
            x = torch.randn(2, 8, 32)
            torch._dynamo.mark_dynamic(x, 1)
            fn = torch.compile(model, backend=Spy(backend))
            with torch.no_grad():
                fn(x)
            self.assertEqual(len(backend.entries), 1)
            self.assertIsNone(backend.entries[0].error)
            self.assertGreaterEqual(len(refs), 2)       # the input and the weights
            self.assertTrue(all(r() is not None for r in refs))
            del fn, model, x
            torch._dynamo.reset()
            gc.collect()
            alive = [r() for r in refs if r() is not None]
            # the backend (still alive here) holds no input, weight or view of one
            self.assertEqual(alive, [], "backend keeps %d input tensors" % len(alive))
            self.assertIsNotNone(backend.entries[0].key)


if __name__ == "__main__":
    unittest.main()
