"""The warm start at warm_start's defaults on stock models (CPU; CTest
test_python_warm_models, kept out of test_python's discovery so its
compile time has its own budget).

Three fresh processes (warm_models_child.py) share one magi cache: the
first binds and runs transformers' Llama, Qwen2 and Mixtral (tiny
configs, random weights), a model whose second input has a size-1
dimension that broadcasts, a model called with keyword inputs that
returns a dict with a nested tuple, and a model with a data-dependent
branch between its layers (a graph break: served per submodule, the
layers and the head bound, the loop and the branch run as Python, the
break named with its file:line). Llama is called as the documentation
shows it, without torch.no_grad(), at length 16 in the first process.
The second process serves every model from stored code, each region's
code run as Inductor's generated module (report code_path "direct"),
Llama under grad included (its output carries autograd, and a backward
through it gives eager's gradients); Llama's new lengths 24 and 9 are a
miss there, compiled in that process (the length dynamic), served and
stored beside the length-16 code. The third does the same with 0 Dynamo
graphs, 0 Inductor code generations and 0 C++ builds, every length from
stored code. Checked: every call returns what model(...) returns (the
same type: CausalLMOutputWithPast with its DynamicCache, dict, tensor)
with the same values as eager and as the first process gives once its
compiles are done (each call run again there: a call first compiled
static is then served by the frame's later dynamic compile, the code the
later processes serve); a second length recompiles in the first process
(as torch.compile at dynamic=None does); Qwen2's input marked dynamic
traces once; a changed float attribute recompiles in the first process;
with on_miss="raise" (keyword, or MAGI_AOT_ON_MISS=raise) the third
refuses what the stored code cannot serve, as before: where the stored
code specialised a float attribute (Llama's rotary attention_scaling),
naming the attribute and both values, and a batch size the stored code
was not compiled for, naming the input, the dimension and the size it
was compiled for.
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
        cls.out = {m: os.path.join(cls.tmp.name, m + ".json")
                   for m in ("first", "second", "third")}
        cls.a = _child(cache, cls.out["first"], "first")
        cls.b = _child(cache, cls.out["second"], "second")
        cls.c = _child(cache, cls.out["third"], "third")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_third_process_compiles_nothing(self):
        self.assertEqual(self.c["dynamo_unique_graphs"], 0)
        self.assertEqual(self.c["counts"], {"inductor_codegen": 0, "cpp_builds": 0},
                         json.dumps(self.c.get("counted_where"), indent=1))
        self.assertGreaterEqual(self.a["counts"]["inductor_codegen"], 4)
        for proc in (self.b, self.c):
            for name, r in proc["models"].items():
                if proc is self.b and name == "llama":
                    continue   # its new lengths compiled there (below)
                with self.subTest(model=name, process=proc is self.b and "second" or "third"):
                    self.assertEqual(r["report"]["served"], "stored", r["report"])
                    self.assertIsNone(r["report"]["reason"])
                    # Inductor's generated module run directly, no CompiledArtifact.load
                    self.assertEqual(r["report"]["code_path"], "direct",
                                     r["report"]["code_path_reason"])
        self.assertEqual(self.c["models"]["llama"]["served_each"], [["stored", "direct"]] * 3)

    def test_documented_example_under_grad_is_served_directly(self):
        """Llama without torch.no_grad(): direct, autograd as eager's."""
        for proc in (self.b, self.c):
            r = proc["models"]["llama"]
            self.assertEqual(r["served_each"][0], ["stored", "direct"])
            self.assertEqual(r["requires_grad"], [True, True])
            self.assertEqual(r["grad_fn"], "RegionFunctionBackward")
            self.assertLess(r["grad_max_abs_vs_eager"], 1e-5)
            self.assertLess(r["max_abs_vs_eager"], 1e-4)

    def test_returns_what_the_model_returns(self):
        self.assertEqual(sorted(self.b["models"]),
                         ["breaks", "gate", "keywords", "llama", "mixtral", "qwen2"])
        for proc in (self.a, self.b, self.c):
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
        c = self.torch.load(self.out["third"] + ".pt")
        self.assertEqual(sorted(b), sorted(c))
        for later, proc in ((b, "second"), (c, "third")):
            for name in later:
                # against the first process's calls once its compiles are
                # done: the same code as the later processes serve (on the
                # CPU also the first calls' outputs; on GPU a static and a
                # dynamic compile of one call may differ in their Triton
                # configs). Llama: its first length only (the one call there)
                self.assertIn(name + "@again", a)
                refs = [(a[name + "@again"], "again")]
                if os.environ.get("MAGI_WARM_DEVICE", "cpu") == "cpu":
                    refs.append((a[name], "first call"))
                for ref, what in refs:
                    for i, (xs, ys) in enumerate(zip(ref, later[name])):
                        for x, y in zip(xs, ys):
                            self.assertTrue(self.torch.equal(x, y),
                                            "%s call %d (%s, %s)" % (name, i, what, proc))
        # the lengths compiled in the second process: the third serves that code
        for i in (1, 2):
            for x, y in zip(b["llama"][i], c["llama"][i]):
                self.assertTrue(self.torch.equal(x, y), "llama call %d" % i)

    def test_new_length_compiled_where_met_and_stored(self):
        # the second process loaded the length-16 code: 24 is compiled there
        # (the length dynamic), 9 served by that code, nothing compiled again
        b = self.b["models"]["llama"]
        self.assertEqual(len(b["report"]["recompiles"]), 1, b["report"]["recompiles"])
        self.assertIn("dim 1 is 24; the stored code was compiled for 16 only",
                      b["report"]["recompiles"][0])
        self.assertEqual([s for s, _ in b["served_each"]], ["stored", "traced", "traced"])
        self.assertEqual(self.b["dynamo_unique_graphs"], 1)
        self.assertEqual(len(self.c["models"]["llama"]["types"]), 3)   # 16, 24 and 9
        # in the process that traces, a second length recompiles (automatic dynamic)
        self.assertEqual(self.a["models"]["gate"]["report"]["recompiles"][0][:26],
                         "L['x'] dim 1 is 12; the st")
        # marked dynamic: one trace serves both lengths
        self.assertEqual(self.a["models"]["qwen2"]["report"]["recompiles"], [])

    def test_graph_break_binds_the_submodules(self):
        for proc in (self.a, self.b, self.c):
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
        # on_miss="raise": refused, as before, naming the attribute
        s = self.c["models"]["llama"]["scaling_changed"]
        self.assertEqual(s["status"], "MAGI_ERR_MISMATCH")
        self.assertIn("['rotary_emb'].attention_scaling is 2.0, the stored code was traced with "
                      "1.0", s["error"])
        self.assertIn("on_miss='raise'", s["error"])

    def test_call_outside_the_stored_shapes_names_the_input(self):
        # MAGI_AOT_ON_MISS=raise: refused, as before; neither stored length serves batch 1
        s = self.c["models"]["llama"]["new_batch"]
        self.assertEqual(s["status"], "MAGI_ERR_MISMATCH")
        self.assertIn("L['args'][0] dim 0 is 1; the stored code was compiled for 2 only",
                      s["error"])
        self.assertIn("on_miss='raise'", s["error"])
        self.assertNotIn("fake", s["error"])


if __name__ == "__main__":
    unittest.main()
