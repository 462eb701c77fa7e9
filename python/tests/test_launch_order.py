"""Inductor keeps a region's gather launches where its graph puts them
(magi_aot.compile.launch_order): the real FSDP block, loaded rank-local on
the copy engine and scheduled by `magi-aot schedule`, compiled with
compile_fx and Inductor's defaults; the generated call() issues the
launches in the graph's order. Without the pass, Inductor's peak-memory
pass sinks them to their waits."""
import os
import re
import subprocess
import tempfile
import unittest

from _util import ROOT, TORCH_REASON, fixture, torch_available

HAVE_TORCH = torch_available()
CLI = os.environ.get("MAGI_CLI", os.path.join(ROOT, "build", "magi-aot"))


def _events(code):
    """The call() of Inductor's generated module as a list of
    ("launch" | "wait" | "mm", line)."""
    body = code[code.index("def call("):]
    out = []
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("#"):
            continue
        if re.search(r"= torch\.ops\.(magi\.symm_all_gather|_c10d_functional\.all_gather)", s):
            out.append(("launch", s))
        elif "wait_tensor" in s:
            out.append(("wait", s))
        elif s.startswith("extern_kernels.mm") or s.startswith("extern_kernels.addmm"):
            out.append(("mm", s))
    return out


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class KeptByInductor(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import magi_aot
        from magi_aot.region import save_doc
        import magi_aot.runtime.ops  # noqa: F401 - registers the operators and the pass
        cls.tmp = tempfile.mkdtemp(prefix="magi-order-")
        local = os.path.join(cls.tmp, "local.json")
        r = magi_aot.load(fixture("fsdp_block"), transport="copy_engine", rank=0, world=4)
        save_doc(r.doc, local)
        cls.scheduled = os.path.join(cls.tmp, "scheduled.magi")
        subprocess.run([CLI, "schedule", local, "--emit", cls.scheduled], check=True,
                       stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.tmp, True)

    def compile(self, keep):
        """Inductor's generated code for the scheduled region, with the
        pass installed (keep) or the post-grad hook emptied."""
        from unittest import mock
        import magi_aot
        import torch
        import torch._dynamo.repro.after_aot as after_aot
        import torch._inductor.codecache as codecache
        import torch._inductor.config as config
        from torch._inductor.compile_fx import compile_fx
        r = magi_aot.load(self.scheduled, transport="copy_engine")
        launches = [n["name"] for n in r.nodes if "symm_all_gather" in str(n.get("target"))
                    or "all_gather_into_tensor" in str(n.get("target"))]
        paths = []
        real = codecache.PyCodeCache.load_by_key_path

        def spy(key, path, *a, **k):
            paths.append(path)
            return real(key, path, *a, **k)
        patches = {"force_disable_caches": True}
        if not keep:
            patches["post_grad_custom_post_pass"] = None
        torch._dynamo.reset()
        # the repro text Inductor keeps for its logs resolves the c10d
        # groups by name; there are none in this process (nothing runs)
        with mock.patch.object(codecache.PyCodeCache, "load_by_key_path", spy), \
                mock.patch.object(after_aot, "_extract_distributed_info", lambda gm: {}), \
                config.patch(patches):
            compile_fx(r.graph_module(), r.fake_inputs(device="cpu"))
        with open(paths[-1]) as f:
            return _events(f.read()), launches

    def test_launches_stay_where_the_schedule_put_them(self):
        from magi_aot.compile.launch_order import KeepLaunchOrder
        import torch._inductor.config as config
        self.assertIsInstance(config.post_grad_custom_post_pass, KeepLaunchOrder)
        events, launches = self.compile(keep=True)
        kinds = [k for k, _ in events]
        self.assertEqual(kinds.count("launch"), len(launches), events)
        # the schedule issued every launch ahead of the first matmul (the
        # analytical costs hide none of them here: each at its earliest)
        first_mm = kinds.index("mm")
        self.assertEqual(kinds[:first_mm].count("launch"), len(launches), events)
        # so every gather but the first has compute queued between its
        # launch and its wait
        waits = [i for i, k in enumerate(kinds) if k == "wait"]
        self.assertTrue(all("mm" in kinds[first_mm:w] for w in waits[1:]), events)

    def test_without_the_pass_inductor_sinks_them(self):
        events, launches = self.compile(keep=False)
        kinds = [k for k, _ in events]
        first_mm = kinds.index("mm")
        self.assertLess(kinds[:first_mm].count("launch"), len(launches), events)

    def test_other_graphs_pass_through(self):
        import torch
        import torch.fx as fx
        from magi_aot.compile.launch_order import pin_launches

        def f(x, w):
            return torch.ops.aten.mm.default(torch.ops.aten.relu.default(x), w)
        gm = fx.symbolic_trace(f)
        before = [n.format_node() for n in gm.graph.nodes]
        got = pin_launches(gm.graph)
        self.assertEqual(got["skipped"], "no magi gather in the graph")
        self.assertEqual([n.format_node() for n in gm.graph.nodes], before)


if __name__ == "__main__":
    unittest.main()
