"""Golden schedules: the placements the overlap schedule gives (launch and
first-use positions, in-flight bytes) frozen for seeded synthetic graphs
(plain and coalesced gathers, casts before a gather, uneven shards,
several layers) and for the real FSDP block, so a change of the pass
shows as a diff of python/tests/data/schedule_golden.json. Regenerate on
purpose only: MAGI_REGEN_GOLDEN=1 python -m unittest test_schedule_golden."""
import json
import os
import random
import unittest

from _util import HERE, TORCH_REASON, fixture, torch_available

HAVE_TORCH = torch_available()
GOLDEN = os.path.join(HERE, "data", "schedule_golden.json")


def _synthetic(seed, layers, coalesced=False, cast=False):
    """A seeded region of `layers` layers: each gathers its weights (of
    seeded, uneven row counts) on the copy engine, then runs a matmul and
    an activation per weight; `coalesced` gathers a layer's weights in one
    call; `cast` gathers one weight a layer after a cast on NCCL."""
    import torch
    import torch.fx as fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    import magi_aot.runtime.ops  # noqa: F401 - the magi operators and their fake kernels
    from magi_aot.fx import graph_to_doc
    rng = random.Random(seed)
    gather = torch.ops.magi.symm_all_gather.default
    gather_many = torch.ops.magi.symm_all_gather_coalesced.default
    nccl = torch.ops._c10d_functional.all_gather_into_tensor.default
    wait = torch.ops._c10d_functional.wait_tensor.default
    g = fx.Graph()
    d = 32
    x = g.placeholder("x")
    inputs = [torch.empty(4, d)]
    h = x
    # every placeholder first, as Dynamo records them
    weights = []
    for layer in range(layers):
        n = rng.randint(1, 3)
        rows = [rng.choice((8, 9, 12, 16)) for _ in range(n)]   # local rows; 9: uneven
        weights.append([g.placeholder("w%d_%d" % (layer, k)) for k in range(n)])
        inputs.extend(torch.empty(r, d) for r in rows)
    for layer, ws in enumerate(weights):
        n = len(ws)
        full = []
        if coalesced and n > 1:
            outs = g.call_function(gather_many, (ws, 4, "0"))
            for k in range(n):
                full.append(g.call_function(wait, (g.call_function(
                    __import__("operator").getitem, (outs, k)),)))
        else:
            for k, w in enumerate(ws):
                if cast and k == 0:
                    w = g.call_function(torch.ops.aten._to_copy.default, (w,),
                                        {"dtype": torch.bfloat16})
                    t = g.call_function(nccl, (w, 4, "0"))
                    full.append(g.call_function(torch.ops.aten._to_copy.default,
                                                (g.call_function(wait, (t,)),),
                                                {"dtype": torch.float32}))
                else:
                    full.append(g.call_function(wait, (g.call_function(gather, (w, 4, "0")),)))
        for f in full:
            h = g.call_function(torch.ops.aten.mm.default, (h, g.call_function(
                torch.ops.aten.t.default, (g.call_function(
                    torch.ops.aten.slice.Tensor, (f, 0, 0, d)),))))
            h = g.call_function(torch.ops.aten.relu.default, (h,))
    g.output((h,))
    gm = fx.GraphModule(torch.nn.Module(), g)
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in inputs]
        FakeTensorProp(gm, mode).propagate(*fakes)
    for node in gm.graph.nodes:
        if "val" in node.meta:
            node.meta["example_value"] = node.meta["val"]
    doc = graph_to_doc(gm, model_tag="synthetic_%d" % seed)
    for n in doc["graph"]["nodes"]:   # the weights are parameters, as Dynamo records them
        if n["op"] == "placeholder" and n["name"].startswith("w"):
            n["input_kind"] = "param"
    return doc


CASES = {
    "plain_3_layers": dict(seed=1, layers=3),
    "plain_6_layers": dict(seed=2, layers=6),
    "coalesced_4_layers": dict(seed=3, layers=4, coalesced=True),
    "cast_on_nccl_4_layers": dict(seed=4, layers=4, cast=True),
}


def _placements(report):
    return {"moved": len(report["moved"]),
            "max_inflight_bytes": report["max_inflight_bytes"],
            "gathers": [[g["node"], g["launch_index"], g["first_use_index"], g["inflight_bytes"]]
                        for g in report["gathers"]]}


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class GoldenSchedules(unittest.TestCase):

    def schedules(self):
        import magi_aot
        from magi_aot.schedule import schedule_region
        out = {}
        for name, kw in CASES.items():
            region = magi_aot.region_from_doc(_synthetic(**kw))
            out[name] = _placements(schedule_region(region)[1])
        region = magi_aot.load(fixture("fsdp_block"), transport="copy_engine", rank=0, world=4)
        out["fsdp_block_rank0_of_4"] = _placements(schedule_region(region)[1])
        return out

    def test_placements_are_the_frozen_ones(self):
        got = self.schedules()
        if os.environ.get("MAGI_REGEN_GOLDEN") == "1":
            with open(GOLDEN, "w") as f:
                json.dump(got, f, indent=1, sort_keys=True)
                f.write("\n")
        with open(GOLDEN) as f:
            want = json.load(f)
        self.assertEqual(sorted(got), sorted(want))
        for name in want:
            with self.subTest(case=name):
                self.assertEqual(got[name], want[name])
        # every synthetic case moves something and keeps within its bound
        for name in CASES:
            self.assertGreater(got[name]["moved"], 0, name)
            self.assertLessEqual(max(g[3] for g in got[name]["gathers"]),
                                 got[name]["max_inflight_bytes"], name)

    def test_the_same_graph_schedules_the_same_in_two_processes(self):
        import subprocess
        import sys
        code = ("import json, test_schedule_golden as t;"
                "print(json.dumps(t.GoldenSchedules('test_placements_are_the_frozen_ones')"
                ".schedules(), sort_keys=True))")
        outs = [subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True,
                               text=True, env=dict(os.environ, PYTHONHASHSEED=str(s)),
                               check=True).stdout for s in (1, 2)]
        self.assertEqual(outs[0], outs[1])
        self.assertTrue(outs[0].startswith("{"), outs[0][:200])


class CliLoadSchedule(unittest.TestCase):
    """`magi-aot load --schedule` is the runtime's pass: the region it
    emits has the node order schedule_region gives the same load, and its
    JSON the same placements (no torch needed)."""

    def test_load_schedule_emits_the_runtimes_order(self):
        import subprocess
        import tempfile
        import magi_aot
        from magi_aot.schedule import schedule_region
        cli = os.environ.get("MAGI_CLI")
        if not cli:
            self.fail("MAGI_CLI is not set (the magi-aot program the suite tests)")
        region = magi_aot.load(fixture("fsdp_block"), transport="copy_engine")
        sched, report = schedule_region(region)
        self.assertGreater(len(report["moved"]), 0)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "scheduled.magi")
            p = subprocess.run([cli, "load", fixture("fsdp_block"), "--transport", "copy_engine",
                                "--schedule", "--emit", out, "--json"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = json.loads(p.stdout)
            emitted = magi_aot.load(out)
        self.assertIn("load", got)
        (cli_sched,) = got["schedule"]
        self.assertTrue(cli_sched["applied"])
        self.assertEqual(cli_sched["moved"], len(report["moved"]))
        self.assertEqual([[g["node"], g["launch_index"], g["consumer_index"], g["inflight_bytes"]]
                          for g in cli_sched["gathers"]],
                         [[g["node"], g["launch_index"], g["first_use_index"], g["inflight_bytes"]]
                          for g in report["gathers"]])
        self.assertEqual([n["name"] for n in emitted.nodes], [n["name"] for n in sched.nodes])
        self.assertNotEqual([n["name"] for n in emitted.nodes], [n["name"] for n in region.nodes])

    def test_costs_without_schedule_is_a_usage_error(self):
        import subprocess
        p = subprocess.run([os.environ["MAGI_CLI"], "load", fixture("fsdp_block"), "--max-inflight-bytes", "9"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("go with --schedule", p.stderr)


if __name__ == "__main__":
    unittest.main()
