"""Inductor keeps a region's gather launches where its graph puts them
(magi_aot.compile.launch_order): the real FSDP block, loaded rank-local on
the copy engine and scheduled by `magi-aot schedule`, compiled with
compile_fx and Inductor's defaults; the generated call() issues each
launch after as many matmuls as the scheduled graph does, and every
gather but the first has compute queued under it. Without the pass,
Inductor moves them."""
import os
import re
import subprocess
import tempfile
import unittest

from _util import ROOT, TORCH_REASON, fixture, torch_available

HAVE_TORCH = torch_available()
CLI = os.environ.get("MAGI_CLI", os.path.join(ROOT, "build", "magi-aot"))


def _events(code):
    """The call() of Inductor's generated module as a list of (kind,
    buffer number) with kind "launch", "wait", "mm" (a matmul) or
    "kernel" (any other compute)."""
    body = code[code.index("def call("):]
    out = []
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("#"):
            continue
        m = re.match(r"buf(\d+) = torch\.ops\.(magi\.symm_all_gather|_c10d_functional\.all_gather)", s)
        if m:
            out.append(("launch", int(m.group(1))))
        elif "wait_tensor" in s:
            out.append(("wait", int(re.search(r"wait_tensor\.default\(buf(\d+)\)", s).group(1))))
        elif s.startswith(("extern_kernels.mm", "extern_kernels.addmm")):
            out.append(("mm", None))
        elif s.startswith("cpp_fused") or s.startswith("extern_kernels."):
            out.append(("kernel", None))
    return out


def _matmuls_before_launches(events):
    """For each launch in order, how many matmuls precede it."""
    out, mms = [], 0
    for kind, _ in events:
        if kind == "mm":
            mms += 1
        elif kind == "launch":
            out.append(mms)
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
        launches, fx_mms, mms = [], [], 0
        for n in r.nodes:
            t = str(n.get("target"))
            if t.endswith("linear"):
                mms += 1
            elif "symm_all_gather" in t or "all_gather_into_tensor" in t:
                launches.append(n["name"])
                fx_mms.append(mms)
        paths = []
        real = codecache.PyCodeCache.load_by_key_path

        def spy(key, path, *a, **k):
            paths.append(path)
            return real(key, path, *a, **k)
        from magi_aot.compile.launch_order import HOOK
        patches = {"force_disable_caches": True}
        if not keep:
            patches[HOOK] = None
        torch._dynamo.reset()
        # the repro text Inductor keeps for its logs resolves the c10d
        # groups by name; there are none in this process (nothing runs)
        with mock.patch.object(codecache.PyCodeCache, "load_by_key_path", spy), \
                mock.patch.object(after_aot, "_extract_distributed_info", lambda gm: {}), \
                config.patch(patches):
            compile_fx(r.graph_module(), r.fake_inputs(device="cpu"))
        with open(paths[-1]) as f:
            self.code = f.read()
        return _events(self.code), launches, fx_mms

    def test_a_compile_in_another_thread_keeps_them_too(self):
        """Inductor's settings are per thread on newer torch: a server that
        compiles in a worker thread (one that never registered the
        operators) gets the same order."""
        import threading
        out = {}

        def work():
            try:
                import torch._inductor.config as config
                from magi_aot.compile.launch_order import HOOK, KeepLaunchOrder
                out["had_pass"] = isinstance(getattr(config, HOOK), KeepLaunchOrder)
                out["result"] = self.compile(keep=True)
            except BaseException as e:  # reported by the main thread
                out["error"] = e
        t = threading.Thread(target=work)
        t.start()
        t.join(600)
        self.assertNotIn("error", out, repr(out.get("error")))
        events, launches, fx_mms = out["result"]
        self.assertEqual(_matmuls_before_launches(events), fx_mms, (out["had_pass"], events))
        self.assertGreater(max(fx_mms), 0)

    def test_launches_stay_where_the_schedule_put_them(self):
        from magi_aot.compile.launch_order import HOOK, KeepLaunchOrder
        import torch._inductor.config as config
        self.assertIsInstance(getattr(config, HOOK), KeepLaunchOrder)
        events, launches, fx_mms = self.compile(keep=True)
        self.assertEqual(len([k for k, _ in events if k == "launch"]), len(launches), events)
        # each launch has as many matmuls before it as in the scheduled graph
        self.assertEqual(_matmuls_before_launches(events), fx_mms, events)
        # the schedule spread them (the memory bound): not all at the top
        self.assertGreater(max(fx_mms), 0)
        # every gather but the region's first has compute queued under it
        from magi_aot.compile.launch_order import code_overlap
        under = code_overlap(self.code)
        self.assertEqual(len(under), len(launches))
        self.assertTrue(all(u["compute_under"] for u in under[1:]), under)
        # the compiled order drawn: one bar per gather, red only where
        # nothing is queued under it (here the region's first)
        import xml.etree.ElementTree as ET
        from magi_aot.compile.launch_order import code_events, code_timeline_svg
        svg = ET.fromstring(code_timeline_svg(self.code, names=launches))
        bars = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect")
                if r.get("fill") in ("#bbbbbb", "#d9534f")]
        self.assertEqual(len(bars), len(launches))
        self.assertEqual([r.get("fill") == "#d9534f" for r in bars], [not u["compute_under"] for u in under])
        kernels = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect") if r.get("fill") == "#4a7ebb"]
        self.assertEqual(len(kernels), sum(1 for k, _n, _t in code_events(self.code) if k == "kernel"))
        self.assertGreater(len(kernels), len(launches))

    def test_without_the_pass_inductor_moves_them(self):
        events, launches, fx_mms = self.compile(keep=False)
        self.assertNotEqual(_matmuls_before_launches(events), fx_mms, events)

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


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class UnreadGathers(unittest.TestCase):
    """A copy-engine gather nothing reads leaves the runtime's graph; one
    whose value (or one coalesced output) is read, and any c10d gather,
    stays."""

    def test_only_unread_copy_engine_gathers_go(self):
        import operator
        import torch
        import torch.fx as fx
        import magi_aot.runtime.ops  # noqa: F401 - the magi operators
        from magi_aot.runtime.gather import drop_unread_gathers
        g = fx.Graph()
        w1, w2, w3, w4, x = (g.placeholder(n) for n in ("w1", "w2", "w3", "w4", "x"))
        wait = torch.ops._c10d_functional.wait_tensor.default
        one = torch.ops.magi.symm_all_gather.default
        many = torch.ops.magi.symm_all_gather_coalesced.default
        nccl = torch.ops._c10d_functional.all_gather_into_tensor.default
        # as a loaded region's graph names them: the packet
        dead = g.call_function(torch.ops.magi.symm_all_gather, (w1, 2, "0"), name="dead")
        g.call_function(torch.ops._c10d_functional.wait_tensor, (dead,), name="dead_wait")
        used = g.call_function(one, (w2, 2, "0"), name="used")
        u = g.call_function(wait, (used,))
        pair = g.call_function(many, ([w3, w4], 2, "0"), name="pair")
        p0 = g.call_function(wait, (g.call_function(operator.getitem, (pair, 0)),))
        g.call_function(wait, (g.call_function(operator.getitem, (pair, 1)),))  # unread
        dead_pair = g.call_function(many, ([w3, w4], 2, "0"), name="dead_pair")
        for k in (0, 1):
            g.call_function(wait, (g.call_function(operator.getitem, (dead_pair, k)),))
        c = g.call_function(nccl, (w1, 2, "0"), name="kept_c10d")
        g.call_function(wait, (c,))
        g.output((g.call_function(torch.ops.aten.add.Tensor, (g.call_function(
            torch.ops.aten.mm.default, (x, u)), p0)),))
        gm = fx.GraphModule(torch.nn.Module(), g)
        self.assertEqual(sorted(drop_unread_gathers(gm)), ["dead", "dead_pair"])
        names = {n.name for n in gm.graph.nodes}
        self.assertFalse({"dead", "dead_wait", "dead_pair"} & names)
        self.assertTrue({"used", "pair", "kept_c10d"} <= names)
        gm.graph.lint()
        self.assertEqual(drop_unread_gathers(gm), [])


if __name__ == "__main__":
    unittest.main()
