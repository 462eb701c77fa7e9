"""Binding tests: the real Dynamo fixtures through the Python API (no torch).

Each test drives libmagi_aot through ctypes and checks what comes back
against the fixture documents themselves or against the CLI.
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from _util import REAL, ROOT, fixture, read_fixture

import magi_aot
from magi_aot import MagiError
from magi_aot.fx import expr as _expr
from magi_aot.cache import _Cache, cache_get
from magi_aot.region import region_from_doc


def rename_symbols(doc, mapping):
    """Consistently rename shape symbols (and placeholders named after them)."""
    pat = re.compile(r"\b(%s)\b" % "|".join(map(re.escape, mapping)))
    text = json.dumps(doc)
    # symbol names appear as JSON keys, expression strings and node names
    text = pat.sub(lambda m: mapping[m.group(1)], text)
    return json.loads(text)


class FixtureLoad(unittest.TestCase):
    def test_every_fixture_round_trips_through_load(self):
        for name in REAL:
            with self.subTest(name):
                orig = read_fixture(name)
                r = magi_aot.load(fixture(name), transport=None)
                self.assertEqual(r.doc, orig)   # lossless: dump == input
                self.assertEqual(r.model_tag, orig["model_tag"])
                self.assertEqual(r.symbols, {k: v["hint"] for k, v in orig["symbols"].items()})
                self.assertEqual(len(r.nodes), len(orig["graph"]["nodes"]))
                self.assertEqual(r.skipped_legacy, [])
                self.assertRegex(r.fingerprint, r"^[0-9a-f]{64}$")

    def test_artifact_save_then_load_equals_document(self):
        with tempfile.TemporaryDirectory() as d:
            for name in REAL:
                with self.subTest(name):
                    orig = read_fixture(name)
                    out = os.path.join(d, name + ".magi")
                    info = magi_aot.save_doc(orig, out)
                    self.assertEqual(info["nodes"], len(orig["graph"]["nodes"]))
                    with open(out, "rb") as f:
                        self.assertEqual(f.read(8), b"MAGIAOT\0")
                    r = magi_aot.load(out, transport=None)
                    self.assertEqual(r.doc, orig)
                    self.assertEqual(r.fingerprint, info["fingerprint"])
                    self.assertEqual(magi_aot.fingerprint(out), magi_aot.fingerprint(fixture(name)))

    def test_save_doc_json_output_is_read_back_equal(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "mixed.json")
            magi_aot.save_doc(read_fixture("mixed"), out)
            with open(out) as f:
                self.assertEqual(json.load(f), read_fixture("mixed"))

    def test_legacy_keys_are_skipped_and_reported(self):
        doc = read_fixture("block")
        doc["example_inputs"] = {"blob": "x" * 1000}
        doc["triton_kernel_info"] = [1, 2, 3]
        doc["some_future_key"] = 1
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "legacy.json")
            with open(src, "w") as f:
                json.dump(doc, f)
            r = magi_aot.load(src, transport=None)
            self.assertEqual(sorted(r.skipped_legacy), ["example_inputs", "triton_kernel_info"])
            self.assertIn("some_future_key", r.ignored)
            self.assertNotIn("example_inputs", r.doc)
            art = os.path.join(d, "legacy.magi")
            magi_aot.save_doc(doc, art)
            with open(art, "rb") as f:
                self.assertNotIn(b"x" * 100, f.read())
            self.assertEqual(magi_aot.load(art, transport=None).doc, read_fixture("block"))


    def test_unknown_keys_warn_and_strict_refuses(self):
        import warnings
        doc = read_fixture("block")
        doc["compile_config"] = {"fsdp_config": {"transprt": "copy_engine"}}
        doc["graph"]["nodes"][1]["kwrags"] = {}
        doc["example_inputs"] = [1]
        with tempfile.TemporaryDirectory() as d:
            art = os.path.join(d, "x.magi")
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                magi_aot.save_doc(doc, art)
            text = [str(w.message) for w in got]
            self.assertTrue(any("compile_config.fsdp_config.transprt (did you mean transport?)" in t
                                for t in text), text)
            self.assertTrue(any("graph.nodes[1].kwrags" in t for t in text), text)
            self.assertFalse(any("example_inputs" in t for t in text), text)  # legacy: silent
            os.unlink(art)
            with self.assertRaises(MagiError) as e:
                magi_aot.save_doc(doc, art, strict=True)
            self.assertIn("unknown key", e.exception.message)
            self.assertFalse(os.path.exists(art))
            src = os.path.join(d, "x.json")
            with open(src, "w") as f:
                json.dump(doc, f)
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                r = magi_aot.load(src, transport=None)
            self.assertTrue(any("x.json: unknown key graph.nodes[1].kwrags" in str(w.message) for w in got),
                            [str(w.message) for w in got])
            self.assertEqual(r.transport_source, "default")

    def test_save_refuses_unknown_dtype_and_undeclared_symbol(self):
        doc = read_fixture("block")
        ph = next(n for n in doc["graph"]["nodes"] if n.get("meta", {}).get("example_value", {}).get("kind") == "tensor")
        bad = copy.deepcopy(doc)
        nb = next(n for n in bad["graph"]["nodes"] if n["name"] == ph["name"])
        nb["meta"]["example_value"]["dtype"] = "bfloat61"
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "x.magi")
            with self.assertRaises(MagiError) as e:
                magi_aot.save_doc(bad, out)
            self.assertIn("node '%s'" % ph["name"], e.exception.message)
            self.assertIn("meta.example_value.dtype: unknown dtype 'bfloat61'", e.exception.message)
            bad = copy.deepcopy(doc)
            nb = next(n for n in bad["graph"]["nodes"] if n["name"] == ph["name"])
            nb["meta"]["example_value"]["shape"][0] = "s12345"
            with self.assertRaises(MagiError) as e:
                magi_aot.save_doc(bad, out)
            self.assertIn("meta.example_value.shape[0]: 's12345' names symbol 's12345'", e.exception.message)
            self.assertFalse(os.path.exists(out))

    def test_legacy_v0_files_load_like_their_json(self):
        import glob
        v0 = sorted(glob.glob(os.path.join(ROOT, "fixtures", "v0", "*.v0")))
        if not v0:
            self.skipTest("no legacy v0 fixtures in fixtures/v0")
        for path in v0:
            name = os.path.basename(path)[:-3]
            with self.subTest(name):
                r = magi_aot.load(path, transport=None)
                self.assertEqual(sorted(r.skipped_legacy), ["example_inputs", "triton_kernel_info"])
                self.assertEqual(r.doc, read_fixture(name))
                self.assertEqual(r.fingerprint, magi_aot.fingerprint(fixture(name)))


class Fingerprints(unittest.TestCase):
    def test_renamed_symbols_give_the_same_fingerprint(self):
        doc = read_fixture("mixed")
        renamed = rename_symbols(doc, {"s17": "s901", "s77": "s3"})
        self.assertNotEqual(json.dumps(doc), json.dumps(renamed))
        self.assertEqual(magi_aot.fingerprint(doc), magi_aot.fingerprint(renamed))
        self.assertEqual(magi_aot.fingerprint(doc), magi_aot.fingerprint(fixture("mixed")))

    def test_different_linkage_or_hint_changes_the_fingerprint(self):
        doc = read_fixture("block")
        other = copy.deepcopy(doc)
        other["symbols"]["s27"]["hint"] = 385
        self.assertNotEqual(magi_aot.fingerprint(doc), magi_aot.fingerprint(other))
        other = copy.deepcopy(doc)
        x = next(n for n in other["graph"]["nodes"] if n["name"] == "l_x_")
        x["meta"]["example_value"]["stride"][0] = "1024*s77"
        self.assertNotEqual(magi_aot.fingerprint(doc), magi_aot.fingerprint(other))

    def test_fingerprints_are_distinct_across_fixtures(self):
        fps = {magi_aot.fingerprint(fixture(n)) for n in REAL}
        self.assertEqual(len(fps), len(REAL))

    def test_fingerprint_agrees_with_the_cli(self):
        cli = os.environ.get("MAGI_CLI")
        if not cli:
            self.skipTest("MAGI_CLI not set (CTest sets it)")
        proc = subprocess.run([cli, "fingerprint"] + [fixture(n) for n in REAL],
                              capture_output=True, text=True)
        if "not available in this build" in proc.stderr:
            self.skipTest("the CLI's fingerprint command is not built in")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = proc.stdout.split("\n")
        got = dict(reversed(line.split(None, 1)) for line in out if line.strip())
        for n in REAL:
            self.assertEqual(got[fixture(n)], magi_aot.fingerprint(fixture(n)))


def _cli_or_skip(tc, *args):
    cli = os.environ.get("MAGI_CLI")
    if not cli:
        tc.skipTest("MAGI_CLI not set (CTest sets it)")
    proc = subprocess.run([cli] + list(args), capture_output=True, text=True)
    if "not available in this build" in proc.stderr:
        tc.skipTest("the CLI's %s command is not built in" % args[0])
    tc.assertEqual(proc.returncode, 0, proc.stderr)
    return proc.stdout


class CliAgreement(unittest.TestCase):
    """What Python writes the CLI reads, and both describe it the same way."""

    def test_cli_dumps_a_python_saved_artifact_unchanged(self):
        with tempfile.TemporaryDirectory() as d:
            for name in ("block", "cp_a2a"):
                out = os.path.join(d, name + ".magi")
                magi_aot.save_doc(read_fixture(name), out)
                self.assertEqual(json.loads(_cli_or_skip(self, "dump", out)), read_fixture(name))

    def test_cli_inputs_equal_python_inputs(self):
        for name in ("mixed", "fsdp_block"):
            got = json.loads(_cli_or_skip(self, "inputs", fixture(name), "--concrete"))
            self.assertEqual(got, magi_aot.inputs(fixture(name), concrete=True))

    def test_cli_cache_key_equals_the_backend_key(self):
        from magi_aot._lib import CRegion
        from magi_aot.region import _dumps
        out = _cli_or_skip(self, "cache", "key", fixture("stack24"))
        with CRegion.from_json_text(_dumps(read_fixture("stack24"))) as r:
            self.assertIn(r.cache_key(), out)


class Inputs(unittest.TestCase):
    def test_one_descriptor_per_placeholder_with_metadata(self):
        for name in REAL:
            with self.subTest(name):
                doc = read_fixture(name)
                phs = [n for n in doc["graph"]["nodes"] if n["op"] == "placeholder"]
                ins = magi_aot.inputs(fixture(name))
                self.assertEqual([i["name"] for i in ins], [p["name"] for p in phs])
                self.assertEqual([i["example_value"] for i in ins],
                                 [p["meta"]["example_value"] for p in phs])

    def test_concrete_inputs_evaluate_under_the_hints(self):
        ins = {i["name"]: i for i in magi_aot.inputs(fixture("block"), concrete=True)}
        self.assertEqual(ins["l_x_"]["concrete"]["shape"], [2, 384, 1024])
        self.assertEqual(ins["l_x_"]["concrete"]["stride"], [384 * 1024, 1024, 1])
        self.assertEqual(ins["s27"]["concrete"]["value"], 384)
        # every symbolic dim of every fixture agrees with the C evaluator run
        # directly on the expression text
        for name in REAL:
            doc = read_fixture(name)
            hints = {k: v["hint"] for k, v in doc["symbols"].items()}
            for i in magi_aot.inputs(fixture(name), concrete=True):
                ex = i["example_value"]
                if ex["kind"] != "tensor":
                    continue
                for d, c in zip(ex["shape"], i["concrete"]["shape"]):
                    self.assertEqual(_expr.eval_int(d, hints), c)

    def test_missing_metadata_names_every_placeholder(self):
        doc = read_fixture("block")
        for n in doc["graph"]["nodes"]:
            if n["name"] in ("l_x_", "s27"):
                del n["meta"]
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "nometa.json")
            with open(p, "w") as f:
                json.dump(doc, f)
            with self.assertRaises(MagiError) as cm:
                magi_aot.inputs(p)
        self.assertEqual(cm.exception.status, "MAGI_ERR_MISSING_META")
        self.assertIn("l_x_", cm.exception.message)
        self.assertIn("s27", cm.exception.message)
        # load() still works and says why there are no descriptors
        r = region_from_doc(doc)
        self.assertIsNone(r.inputs)
        self.assertEqual(r.inputs_error.status, "MAGI_ERR_MISSING_META")
        self.assertEqual(r.placeholders[2]["example_value"], None)

    def test_unbacked_placeholder_fails_concrete_naming_the_symbol(self):
        doc = read_fixture("cp_a2a")
        x = next(n for n in doc["graph"]["nodes"] if n["name"] == "l_x_")
        x["meta"]["example_value"]["shape"][0] = "u0"
        r = region_from_doc(doc)
        self.assertEqual(r.inputs[2]["example_value"]["shape"][0], "u0")
        with self.assertRaises(MagiError) as cm:
            r.concrete_inputs()
        self.assertEqual(cm.exception.status, "MAGI_ERR_UNBACKED")
        self.assertIn("u0", cm.exception.message)


class CopyEngineReport(unittest.TestCase):
    def test_fsdp_block_rewrites_exactly_the_eligible_gathers(self):
        r = magi_aot.load(fixture("fsdp_block"), transport="copy_engine")
        self.assertEqual((r.transport, r.transport_source), ("copy_engine", "option"))
        rep = {g["name"]: g for g in r.rewrite_report}
        rewritten = sorted(n for n, g in rep.items() if g["reason"] == "rewritten")
        self.assertEqual(rewritten, ["all_gather_into_tensor_coalesced", "tensor", "tensor_2",
                                     "tensor_4"])
        self.assertEqual(rep["tensor_1"]["reason"], "cast")
        self.assertEqual(rep["tensor_3"]["reason"], "pad")
        self.assertEqual(r.n_rewritten, 4)
        targets = {n["name"]: n["target"] for n in r.nodes}
        self.assertEqual(targets["tensor"], "torch.ops.magi.symm_all_gather")
        self.assertEqual(targets["all_gather_into_tensor_coalesced"],
                         "torch.ops.magi.symm_all_gather_coalesced")
        self.assertEqual(targets["tensor_1"], "torch.ops._c10d_functional.all_gather_into_tensor")
        bound = sorted(b["placeholder"] for b in r.bind_report["bindings"])
        self.assertEqual(bound, ["l_self_parameters_expert_a_", "l_self_parameters_expert_b_",
                                 "l_self_parameters_w_down_", "l_self_parameters_wo_",
                                 "l_self_parameters_wq_"])
        self.assertEqual(sorted((w["group"], w["group_size"]) for w in r.bind_report["windows"]),
                         [("0", 4), ("1", 2)])
        # the fingerprint is of the region as saved, not of the rewritten one
        self.assertEqual(r.fingerprint, magi_aot.fingerprint(fixture("fsdp_block")))

    def test_nccl_transport_keeps_every_gather(self):
        r = magi_aot.load(fixture("fsdp_block"), transport="nccl")
        self.assertEqual(r.n_rewritten, 0)
        self.assertEqual((r.transport, r.transport_source), ("nccl", "option"))
        self.assertEqual({g["reason"] for g in r.rewrite_report}, {"transport"})
        self.assertEqual(r.doc, read_fixture("fsdp_block"))


class MeshGroups(unittest.TestCase):
    """The library reports every mesh dimension a region's DTensor
    placeholders name, with its size and its stride in a row-major mesh of
    consecutive ranks, and the runtime's groups follow it: the outer
    dimension of a 2 x 2 mesh is ranks 2 apart, the inner one consecutive,
    a collective that names a group without its size is sized from it."""

    def _doc(self):
        ten = {"kind": "tensor", "dtype": "float32", "shape": [8, 4], "stride": [4, 1], "storage_offset": 0,
               "device": "cpu", "requires_grad": False}
        spec = {"mesh_shape": [2, 2], "groups": ["outer", "inner"], "dim_names": ["efsdp", "ep"],
                "placements": ["Shard(0)", "Replicate()"], "shard_rule": "chunk"}
        nodes = [
            {"name": "w", "op": "placeholder", "target": "L_w_", "input_kind": "param",
             "meta": {"example_value": dict(ten, dtensor=spec)}},
            {"name": "x", "op": "placeholder", "target": "L_x_", "input_kind": "input", "meta": {"example_value": ten}},
            {"name": "a2a", "op": "call_function", "target": "torch.ops._c10d_functional.all_to_all_single",
             "args": [{"node": "x"}, [4, 4], [4, 4], "inner"], "meta": {"example_value": ten}},
            {"name": "ag", "op": "call_function", "target": "torch.ops._c10d_functional.all_gather_into_tensor",
             "args": [{"node": "x"}, 2, "outer"], "meta": {"example_value": dict(ten, shape=[16, 4])}},
            {"name": "wait", "op": "call_function", "target": "torch.ops._c10d_functional.wait_tensor",
             "args": [{"node": "ag"}], "meta": {"example_value": dict(ten, shape=[16, 4])}},
            {"name": "output", "op": "output", "target": "output",
             "args": [{"tuple": [{"node": "a2a"}, {"node": "wait"}]}]}]
        return {"format": "magi-fx-json", "version": 1, "model_tag": "mesh", "symbols": {}, "graph": {"nodes": nodes}}

    def test_sizes_and_strides_reported_and_groups_placed(self):
        from magi_aot.runtime.groups import mesh_layout, resolve_groups
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mesh.json")
            with open(path, "w") as f:
                json.dump(self._doc(), f)
            r = magi_aot.load(path)
        self.assertEqual(r.mesh_groups, {"outer": {"size": 2, "stride": 2}, "inner": {"size": 2, "stride": 1}})
        layout = mesh_layout([r])
        for rank, outer, inner in ((0, [0, 2], [0, 1]), (1, [1, 3], [0, 1]), (2, [0, 2], [2, 3]),
                                   (3, [1, 3], [2, 3])):
            mine, parts = resolve_groups([r.doc], [], rank, 4, None, layout)
            self.assertEqual((mine["outer"], mine["inner"]), (outer, inner), rank)
            self.assertEqual(parts["outer"], [[0, 2], [1, 3]])
        # without the layout the all-to-all's group has no size, and the
        # outer dimension would be taken for consecutive ranks
        mine, _ = resolve_groups([r.doc], [], 1, 4, None, None)
        self.assertNotIn("inner", mine)
        self.assertEqual(mine["outer"], [0, 1])

    def test_a_group_with_two_layouts_is_refused(self):
        from magi_aot.runtime.groups import mesh_layout

        class R:
            def __init__(self, stride):
                self.mesh_groups = {"g": {"size": 2, "stride": stride}}
        with self.assertRaises(magi_aot.MagiError) as cm:
            mesh_layout([R(1), R(2)])
        self.assertIn("group 'g'", str(cm.exception))


class OlderDynamoForms(unittest.TestCase):
    """Before torch 2.12 Dynamo records SimpleFSDP's re-wrap
    `DTensor.from_local(x, mesh, placements)` as a closure of its own,
    `handle_from_local.<locals>.fn_with_prim_types(x)`, the mesh and the
    placements baked in (the node's DTensor spec still has them): the
    expert weights of an expert mesh traced there lower as on torch 2.13."""

    FORM = ("torch._dynamo.variables.torch.TorchInGraphFunctionVariable._get_handlers"
            ".<locals>.handle_from_local.<locals>.fn_with_prim_types")

    def test_the_rewrap_closure_is_looked_through(self):
        src = os.path.join(ROOT, "tests", "lower_data", "layouts.json")
        with open(src) as f:
            doc = json.load(f)
        n = 0
        for node in doc["graph"]["nodes"]:
            if node.get("target") == "torch.distributed.tensor._api.DTensor.from_local":
                node.update(target=self.FORM, args=node["args"][:1], kwargs={"shape": None, "stride": None})
                n += 1
        self.assertGreater(n, 0)
        with tempfile.TemporaryDirectory() as d:
            old = os.path.join(d, "older.json")
            with open(old, "w") as f:
                json.dump(doc, f)
            got = [magi_aot.load_many([p], transport="copy_engine", rank=0, world=4)[0].redistributes
                   for p in (src, old)]
        brief = [[(e["lowered"], e.get("rewrapped"), e.get("reason")) for e in r] for r in got]
        self.assertEqual(brief[1], brief[0])
        self.assertTrue(any(e.get("rewrapped") for e in got[1]), got[1])


class LoadMany(unittest.TestCase):
    def _pair(self, d):
        """fsdp_block as two regions (model_idx 0 and 1) sharing every weight."""
        a = read_fixture("fsdp_block")
        b = copy.deepcopy(a)
        b["model_idx"] = 1
        pa, pb = os.path.join(d, "a.json"), os.path.join(d, "b.json")
        magi_aot.save_doc(a, pa)
        magi_aot.save_doc(b, pb)
        return pa, pb

    def test_one_name_with_two_module_paths_is_refused_naming_both(self):
        """Regions share a slot by weight name; the save backend records
        each module weight's path from the model's root: the same name with
        two paths is two weights, refused naming both."""
        a = read_fixture("fsdp_block")
        b = copy.deepcopy(a)
        b["model_idx"] = 1
        for doc, path in ((a, "tok_embeddings.weight"), (b, "lm_head.weight")):
            for n in doc["graph"]["nodes"]:
                if n["name"] == "l_self_parameters_wq_":
                    n["meta"]["example_value"]["module_path"] = path
        with tempfile.TemporaryDirectory() as d:
            pa, pb = os.path.join(d, "a.json"), os.path.join(d, "b.json")
            magi_aot.save_doc(a, pa)
            magi_aot.save_doc(b, pb)
            with self.assertRaises(magi_aot.MagiError) as cm:
                magi_aot.load_many([pa, pb], transport="copy_engine")
            m = cm.exception.message
            self.assertEqual(cm.exception.status, "MAGI_ERR_MISMATCH")
            self.assertIn("weight 'L_self_parameters_wq_' is 'tok_embeddings.weight' in %s" % pa, m)
            self.assertIn("'lm_head.weight' in %s" % pb, m)
            # the same path in both: one weight, one slot
            b2 = copy.deepcopy(a)
            b2["model_idx"] = 1
            magi_aot.save_doc(b2, pb)
            ra, rb = magi_aot.load_many([pa, pb], transport="copy_engine")
            self.assertEqual(ra.bind_report["slots"], rb.bind_report["slots"])

    def test_two_regions_sharing_a_weight_get_one_slot(self):
        with tempfile.TemporaryDirectory() as d:
            pa, pb = self._pair(d)
            one = magi_aot.load(pa, transport="copy_engine")
            ra, rb = magi_aot.load_many([pa, pb], transport="copy_engine")
            slots = ra.bind_report["slots"]
            self.assertIs(slots, ra.bind_report["slots"])
            self.assertEqual(slots, rb.bind_report["slots"])
            # one slot per weight, as many as for one region alone
            self.assertEqual(len(slots), len(one.bind_report["slots"]))
            self.assertEqual(len({s["weight"] for s in slots}), len(slots))
            by_a = {b["placeholder"]: b["slot"] for b in ra.bind_report["bindings"]}
            by_b = {b["placeholder"]: b["slot"] for b in rb.bind_report["bindings"]}
            self.assertEqual(by_a, by_b)
            self.assertIn("l_self_parameters_wq_", by_a)
            self.assertEqual(ra.bind_report["plan_sha256"], rb.bind_report["plan_sha256"])
            # the CLI plans the same set the same way
            out = _cli_or_skip(self, "load", pa, pb, "--transport", "copy_engine", "--json")
            self.assertEqual(json.loads(out)["plan_sha256"], ra.bind_report["plan_sha256"])

    def test_transport_comes_from_compile_config_else_nccl(self):
        with tempfile.TemporaryDirectory() as d:
            doc = read_fixture("fsdp_block")
            doc["compile_config"] = {"fsdp_config": {"transport": "copy_engine"}}
            p = os.path.join(d, "ce.json")
            magi_aot.save_doc(doc, p)
            r = magi_aot.load(p)
            self.assertEqual((r.transport, r.transport_source), ("copy_engine", "compile_config"))
            self.assertEqual(r.n_rewritten, 4)
            r = magi_aot.load(fixture("fsdp_block"))
            self.assertEqual((r.transport, r.transport_source), ("nccl", "default"))
            self.assertEqual(r.n_rewritten, 0)

    def test_options_abi_is_checked(self):
        # A mirror of the plan options that lacks a field (as this package
        # once had) is refused, not read past its end.
        import ctypes
        from magi_aot._lib import lib, struct_version

        class Short(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("transport", ctypes.c_int),
                        ("slot_align", ctypes.c_uint32), ("window_cap_bytes", ctypes.c_uint64)]
        opts = Short(struct_version(2, Short), 0, 0, 0)
        plan = ctypes.c_void_p()
        with self.assertRaises(MagiError) as cm:
            lib.magi_symm_plan_build(ctypes.byref(plan), None, 0, ctypes.cast(ctypes.byref(opts),
                                     ctypes.POINTER(magi_aot._lib.SymmPlanOptions)))
        self.assertEqual(cm.exception.status, "MAGI_ERR_VERSION")
        self.assertIn("magi_symm_plan_options", cm.exception.message)


class Errors(unittest.TestCase):
    def _write(self, d, name, data):
        p = os.path.join(d, name)
        with open(p, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return p

    def test_errors_carry_status_and_message(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(MagiError) as cm:
                magi_aot.load(os.path.join(d, "absent.magi"))
            self.assertEqual(cm.exception.status, "MAGI_ERR_IO")
            self.assertIn("absent.magi", cm.exception.message)

            doc = read_fixture("mixed")
            doc["version"] = 2
            with self.assertRaises(MagiError) as cm:
                magi_aot.load(self._write(d, "v2.json", json.dumps(doc)))
            self.assertEqual(cm.exception.status, "MAGI_ERR_VERSION")

            doc = read_fixture("mixed")
            doc["graph"]["nodes"][4]["args"][0] = {"node": "nope"}
            with self.assertRaises(MagiError) as cm:
                magi_aot.load(self._write(d, "bad.json", json.dumps(doc)))
            self.assertEqual(cm.exception.status, "MAGI_ERR_FORMAT")
            self.assertIn("nope", cm.exception.message)

    def test_corrupt_artifact_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "a.magi")
            magi_aot.save_doc(read_fixture("block"), p)
            with open(p, "rb") as f:
                data = bytearray(f.read())
            data[-20] ^= 0xFF
            bad = self._write(d, "bad.magi", bytes(data))
            with self.assertRaises(MagiError) as cm:
                magi_aot.load(bad)
            self.assertIn(cm.exception.status, ("MAGI_ERR_DIGEST", "MAGI_ERR_CORRUPT"))

    def test_save_refuses_an_invalid_document_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            doc = read_fixture("block")
            doc["graph"]["nodes"][0]["op"] = "bogus"
            out = os.path.join(d, "x.magi")
            with self.assertRaises(MagiError):
                magi_aot.save_doc(doc, out)
            self.assertFalse(os.path.exists(out))


class Cache(unittest.TestCase):
    def test_region_key_is_rename_invariant_and_encoding_deterministic(self):
        from magi_aot._lib import CRegion
        from magi_aot.region import _dumps
        doc = read_fixture("mixed")
        renamed = rename_symbols(doc, {"s17": "s901", "s77": "s3"})
        with CRegion.from_json_text(_dumps(doc)) as a, \
                CRegion.from_json_text(_dumps(renamed)) as b:
            self.assertEqual(a.cache_key(), b.cache_key())
            self.assertEqual(a.encode(), a.encode())  # deterministic bytes
            self.assertNotEqual(a.encode(), b.encode())
        for name in REAL:
            with CRegion.from_json_text(_dumps(read_fixture(name))) as r:
                fast = r.encode(zstd_level=1)
                self.assertEqual(magi_aot.load_bytes(fast, transport=None).doc,
                                 read_fixture(name))

    def test_put_then_get_in_another_process(self):
        with tempfile.TemporaryDirectory() as d:
            from magi_aot._lib import CRegion
            from magi_aot.region import _dumps
            with CRegion.from_json_text(_dumps(read_fixture("fsdp_block"))) as r:
                key = r.cache_key()
                with _Cache(d) as c:
                    res = c.put(key, r.encode())
                self.assertTrue(res.published)
            code = ("import sys, json; sys.path.insert(0, %r); import magi_aot;"
                    "from magi_aot.cache import cache_get;"
                    "r = cache_get(%r, %r, transport='copy_engine');"
                    "print(json.dumps([r.fingerprint, r.n_rewritten]))"
                    % (os.path.join(ROOT, "python"), d, key))
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True, env=dict(os.environ)).stdout
            fp, nrew = json.loads(out)
            self.assertEqual(fp, magi_aot.fingerprint(fixture("fsdp_block")))
            self.assertEqual(nrew, 4)
            with self.assertRaises(MagiError) as cm:
                cache_get(d, "0" * 64)
            self.assertEqual(cm.exception.status, "MAGI_ERR_NOT_FOUND")


class Expressions(unittest.TestCase):
    def test_parse_through_the_c_parser(self):
        t = _expr.parse("((s17 + s77)//2)")
        self.assertEqual(t, ("floordiv", (("add", (("sym", "s17"), ("sym", "s77"))), ("int", 2))))
        self.assertEqual(_expr.symbols(_expr.parse("Max(1, u0 + u1) * s3")), ["u0", "u1", "s3"])
        self.assertEqual(_expr.eval_int("Mod(s17 + s77, 3)", {"s17": 40, "s77": 96}), 136 % 3)
        with self.assertRaises(MagiError) as cm:
            _expr.parse("s1 + + )")
        self.assertEqual(cm.exception.status, "MAGI_ERR_EXPR")

    def test_python_algebra_matches_the_c_evaluator(self):
        class Ints(_expr.Algebra):
            def __init__(self, h):
                self.h = h

            def sym(self, n):
                return self.h[n]
        texts = set()
        for name in REAL:
            doc = read_fixture(name)
            hints = {k: v["hint"] for k, v in doc["symbols"].items()}
            if any(v is None for v in hints.values()):
                continue
            for n in doc["graph"]["nodes"]:
                ex = (n.get("meta") or {}).get("example_value") or {}
                if ex.get("kind") == "tensor":
                    for d in ex["shape"] + (ex["stride"] or []):
                        if isinstance(d, str):
                            texts.add((name, d))
        self.assertGreater(len(texts), 10)
        for name, t in texts:
            hints = {k: v["hint"] for k, v in read_fixture(name)["symbols"].items()}
            self.assertEqual(Ints(hints).build(_expr.parse(t)), _expr.eval_int(t, hints), t)


class LibraryDiscovery(unittest.TestCase):
    def test_bad_magi_aot_lib_is_a_clear_error(self):
        env = dict(os.environ, MAGI_AOT_LIB="/nonexistent/libmagi_aot.so")
        code = ("import sys; sys.path.insert(0, %r); import magi_aot\n"
                "try:\n    magi_aot.library_version()\nexcept OSError as e:\n    print('ERR', e)"
                % os.path.join(ROOT, "python"))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env).stdout
        self.assertIn("ERR libmagi_aot not found", out)
        self.assertIn("/nonexistent/libmagi_aot.so", out)

    def test_version(self):
        self.assertRegex(magi_aot.library_version(), r"^\d+\.\d+\.\d+$")

class LoadReportRepr(unittest.TestCase):
    """The warm start's report reads served, code path and reason first;
    the stored code's digests come only on request."""

    def _report(self):
        from magi_aot.report import LoadReport
        blobs = [{"name": "kernel_%d.so" % i, "size": 10, "sha256": "%064x" % i} for i in range(19)]
        return LoadReport(timings={"total_s": 0.41234567}, recompiles=[], reason=None, served="stored",
                          header={"blobs": blobs, "traced_files": {"model.py": "ab" * 32}, "key": {}},
                          code_path="direct", code_path_reason=None)

    def test_repr_leads_with_what_a_user_reads(self):
        text = repr(self._report())
        self.assertTrue(text.startswith("LoadReport(served='stored', code_path='direct', reason=None, "), text)
        self.assertNotIn("%064x" % 3, text)          # no digest
        self.assertIn("19 blobs, 1 traced files; .digests()", text)
        self.assertIn("'total_s': 0.412", text)
        self.assertLess(len(text), 400, text)
        self.assertEqual(str(self._report()), text)

    def test_digests_on_request_and_dict_unchanged(self):
        r = self._report()
        d = r.digests()
        self.assertEqual(len(d["blobs"]), 19)
        self.assertEqual(d["blobs"]["kernel_3.so"], "%064x" % 3)
        self.assertEqual(d["traced_files"], {"model.py": "ab" * 32})
        self.assertEqual(r["header"]["blobs"][0]["sha256"], "%064x" % 0)   # still a dict
        self.assertIsInstance(r, dict)
        from magi_aot.report import LoadReport
        self.assertEqual(LoadReport(served="traced").digests(), {"blobs": {}, "traced_files": {}})

    def test_warm_start_report_is_one(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not importable")
        from magi_aot.report import LoadReport
        with tempfile.TemporaryDirectory() as d:
            fwd = magi_aot.warm_start(torch.nn.Linear(2, 2), d, model_tag="x")
            self.assertIsInstance(fwd.report, LoadReport)
            self.assertTrue(repr(fwd.report).startswith("LoadReport(served=None, code_path=None, reason="))


if __name__ == "__main__":
    unittest.main()
