"""The warm start at warm_start's defaults on stock models (CPU; CTest
test_python_warm_models, kept out of test_python's discovery so its
compile time has its own budget).

Two fresh processes (warm_models_child.py) share one magi cache: the
first binds and runs transformers' Llama, Qwen2 and Mixtral (tiny
configs, random weights), a model whose second input has a size-1
dimension that broadcasts, a model called with keyword inputs that
returns a dict with a nested tuple, and a model with a data-dependent
branch between its layers (a graph break: served per submodule, the
layers and the head bound, the loop and the branch run as Python, the
break named with its file:line); the second does the same with 0 Dynamo graphs, 0
Inductor code generations and 0 C++ builds, each region's code served by
Inductor's generated module run directly (report code_path "direct"). Checked: every call returns
what model(...) returns (the same type: CausalLMOutputWithPast with its
DynamicCache, dict, tensor) with the same values as eager and as the
first process gives once its compiles are done (each call run again
there: a call first compiled static is then served by the frame's later
dynamic compile, the code the second process serves); a second sequence length recompiles in the first process
(as torch.compile at dynamic=None does) and is served from the stored
code in the second; Qwen2's input marked dynamic traces once; a changed
float attribute recompiles in the first process and, where the stored
code specialised it (Llama's rotary attention_scaling), is refused in the
second naming the attribute and both values, as is a batch size the
stored code was not compiled for (naming the input, the dimension and
the size it was compiled for).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from _util import HERE, ROOT, TORCH_REASON, torch_available

HAVE_TORCH = torch_available()
try:
    import transformers  # noqa: F401
    HAVE_TF = True
except Exception:  # noqa: BLE001
    HAVE_TF = False


def _child(cache, out, mode):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "warm_models_child.py"), cache,
                           out, mode], capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        raise AssertionError("%s process failed (%d):\n%s\n%s" % (
            mode, proc.returncode, proc.stdout[-3000:], proc.stderr[-6000:]))
    with open(out) as f:
        return json.load(f)


@unittest.skipUnless(HAVE_TORCH and HAVE_TF, TORCH_REASON + " (or transformers is missing)")
class WarmModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.torch = torch
        cls.tmp = tempfile.TemporaryDirectory(prefix="magi-warm-models-")
        cache = os.path.join(cls.tmp.name, "cache")
        cls.out = {m: os.path.join(cls.tmp.name, m + ".json") for m in ("first", "second")}
        cls.a = _child(cache, cls.out["first"], "first")
        cls.b = _child(cache, cls.out["second"], "second")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_second_process_compiles_nothing(self):
        self.assertEqual(self.b["dynamo_unique_graphs"], 0)
        self.assertEqual(self.b["counts"], {"inductor_codegen": 0, "cpp_builds": 0},
                         json.dumps(self.b.get("counted_where"), indent=1))
        self.assertGreaterEqual(self.a["counts"]["inductor_codegen"], 4)
        for name, r in self.b["models"].items():
            with self.subTest(model=name):
                self.assertEqual(r["report"]["served"], "stored", r["report"])
                self.assertIsNone(r["report"]["reason"])
                # Inductor's generated module run directly, no CompiledArtifact.load
                self.assertEqual(r["report"]["code_path"], "direct",
                                 r["report"]["code_path_reason"])

    def test_returns_what_the_model_returns(self):
        self.assertEqual(sorted(self.b["models"]),
                         ["breaks", "gate", "keywords", "llama", "mixtral", "qwen2"])
        for proc in (self.a, self.b):
            for name, r in proc["models"].items():
                with self.subTest(model=name):
                    self.assertEqual(r["types"], r["eager_types"])
                    self.assertEqual(r["n_leaves"][0], r["n_leaves"][1])
                    self.assertLess(r["max_abs_vs_eager"], 1e-4)
        self.assertEqual(self.b["models"]["llama"]["types"][0],
                         "CausalLMOutputWithPast(logits,past_key_values)")
        self.assertEqual(self.b["models"]["keywords"]["types"][0], "dict(y,aux)")
        self.assertEqual(self.b["models"]["mixtral"]["types"][0],
                         "MoeCausalLMOutputWithPast(logits,past_key_values)")
        self.assertEqual(self.b["models"]["breaks"]["types"], ["dict(y)", "dict(y)"])
        a = self.torch.load(self.out["first"] + ".pt")
        b = self.torch.load(self.out["second"] + ".pt")
        for name in b:
            # against the first process's calls once its compiles are done:
            # the same code as the second process serves (on the CPU also
            # the first calls' outputs; on GPU a static and a dynamic
            # compile of one call may differ in their Triton configs)
            self.assertIn(name + "@again", a)
            refs = [(a[name + "@again"], "again")]
            if os.environ.get("MAGI_WARM_DEVICE", "cpu") == "cpu":
                refs.append((a[name], "first call"))
            for ref, what in refs:
                for i, (xs, ys) in enumerate(zip(ref, b[name])):
                    for x, y in zip(xs, ys):
                        self.assertTrue(self.torch.equal(x, y), "%s call %d (%s)" % (name, i, what))

    def test_second_length_recompiles_first_and_is_stored(self):
        rec = self.a["models"]["llama"]["report"]["recompiles"]
        self.assertEqual(len(rec), 1, rec)
        self.assertIn("dim 1 is 24; the stored code was compiled for 16 only", rec[0])
        self.assertEqual(len(self.b["models"]["llama"]["types"]), 3)   # 16, 24 and 9
        self.assertEqual(self.a["models"]["gate"]["report"]["recompiles"][0][:26],
                         "L['x'] dim 1 is 12; the st")
        # marked dynamic: one trace serves both lengths
        self.assertEqual(self.a["models"]["qwen2"]["report"]["recompiles"], [])

    def test_graph_break_binds_the_submodules(self):
        for proc in (self.a, self.b):
            rep = proc["models"]["breaks"]["report"]
            self.assertEqual(sorted(rep["modules"]), ["head", "layers.0", "layers.1"])
            self.assertEqual(rep["eager"], [""])
            (brk,) = rep["breaks"]
            self.assertEqual(brk["reason"], "Data-dependent branching")
            self.assertTrue(brk["where"].endswith("warm_models_child.py:%d" % self.b["break_line"]),
                            brk)
            self.assertEqual(brk["code"], "if x.sum() > 0:")
        self.assertEqual(set(self.b["models"]["breaks"]["report"]["modules"].values()),
                         {"stored"})

    def test_changed_float_attribute(self):
        k = self.a["models"]["keywords"]
        self.assertEqual(k["alpha_changed"]["served"], "traced")
        self.assertIn("L['self'].alpha is 0.25, the stored code was traced with 0.5",
                      k["report"]["recompiles"][-1])
        self.assertEqual(k["alpha_changed"]["max_abs_vs_eager"], 0.0)
        # the recompiled region reads it every call
        self.assertEqual(self.b["models"]["keywords"]["alpha_changed"]["served"], "stored")
        self.assertEqual(self.b["models"]["keywords"]["alpha_changed"]["max_abs_vs_eager"], 0.0)
        s = self.b["models"]["llama"]["scaling_changed"]
        self.assertEqual(s["status"], "MAGI_ERR_MISMATCH")
        self.assertIn("['rotary_emb'].attention_scaling is 2.0, the stored code was traced with "
                      "1.0", s["error"])

    def test_call_outside_the_stored_shapes_names_the_input(self):
        s = self.b["models"]["llama"]["new_batch"]
        self.assertEqual(s["status"], "MAGI_ERR_MISMATCH")
        self.assertIn("L['args'][0] dim 0 is 1; the stored code was compiled for 2 only",
                      s["error"])
        self.assertNotIn("fake", s["error"])


if __name__ == "__main__":
    unittest.main()
