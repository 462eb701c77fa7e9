"""Compiled code in the artifact: the warm start on CPU (Inductor's C++ backend).

Unit part (no compile): the payload format and its hostile inputs, the key
comparison (environment, fingerprint as rewritten, transport, traced
sources), Dynamo source parsing, the COMPILED section through the binding.

Process part (python/tests/warm_child.py, each a fresh interpreter with a
fresh Inductor cache directory): a baseline traces and compiles the small
transformer of data/tiny_transformer.py into a magi cache of its own; A
traces and stores it into a shared cache; B loads it from there with zero
Dynamo graphs, zero Inductor code generations and zero C++ builds and
matches A's and the baseline's outputs exactly; C runs after the model's source file was edited and re-traces,
naming the file; D simulates another torch version in the key and compiles
from the stored graph, naming the field. Binding errors (missing
parameter, wrong shape, wrong dtype) and an index of several regions
stored outside warm_start use the cache A left. GraphBreaks: the errors
for a model with a graph break that warm_start cannot serve (Dynamo only,
nothing compiled). MAGI_WARM_DEVICE=cuda runs the processes on the GPU
(Triton kernels instead of C++).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from _util import HERE, ROOT, TORCH_REASON, fixture, torch_available

import magi_aot
from magi_aot.compile import code as compiled
from magi_aot.compile import keys as stored_keys, payload as stored_payload
from magi_aot._lib import SECTION_COMPILED, CRegion, MagiError, read_opaque_sections

HAVE_TORCH = torch_available()
MODEL_SRC = os.path.join(HERE, "data", "tiny_transformer.py")


class Payload(unittest.TestCase):
    def test_round_trip(self):
        blobs = [("standalone", b"x" * 1000), ("so/ab/c.so", bytes(range(256)))]
        data = stored_payload.pack({"key": {"torch": "t"}, "placeholders": []}, blobs)
        header, got = stored_payload.unpack(data)
        self.assertEqual(header["key"], {"torch": "t"})
        self.assertEqual(got, dict(blobs))
        self.assertEqual([b["sha256"] for b in header["blobs"]],
                         [hashlib.sha256(b).hexdigest() for _, b in blobs])

    def test_hostile(self):
        data = stored_payload.pack({"key": {}}, [("standalone", b"abc" * 50)])
        cases = {
            "bad magic": b"XAGICODE" + data[8:],
            "truncated": data[:-1],
            "trailing": data + b"\0",
            "short": data[:10],
            "header past end": data[:12] + (2 ** 31).to_bytes(4, "little") + data[16:],
            "flipped blob byte": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
            "newer version": data[:8] + (9).to_bytes(4, "little") + data[12:],
        }
        for what, bad in cases.items():
            with self.subTest(what):
                with self.assertRaises(MagiError) as cm:
                    stored_payload.unpack(bad)
                self.assertIn("compiled section", cm.exception.message)
        with self.assertRaises(MagiError) as cm:
            stored_payload.unpack(cases["flipped blob byte"])
        self.assertEqual(cm.exception.status, "MAGI_ERR_DIGEST")

    def test_header_alone(self):
        """header_of reads the header without reading or hashing a blob
        (the grad mode a region is compiled in), and refuses what unpack
        refuses before the blobs."""
        from unittest import mock
        data = stored_payload.pack({"key": {}, "grad_enabled": True}, [("standalone", b"abc" * 50)])
        flipped = data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]
        with mock.patch.object(stored_payload, "hashlib") as h:
            self.assertTrue(stored_payload.header_of(flipped)["grad_enabled"])
        h.sha256.assert_not_called()
        for bad in (b"XAGICODE" + data[8:], data[:10], data[:8] + (9).to_bytes(4, "little") + data[12:]):
            with self.assertRaises(MagiError) as cm:
                stored_payload.header_of(bad)
            self.assertIn("compiled section", cm.exception.message)

    def test_through_the_artifact(self):
        """The library carries the payload byte for byte; a flipped byte in
        the stored section is refused before the payload is handed out."""
        payload = stored_payload.pack({"key": {}}, [("standalone", os.urandom(5000))])
        with open(fixture("block")) as f:
            text = f.read()
        with CRegion.from_json_text(text) as r:
            data = r.encode_with([(SECTION_COMPILED, payload)])
            plain = r.encode()
        self.assertEqual(read_opaque_sections(data), [payload])
        self.assertEqual(read_opaque_sections(plain), [])
        region = magi_aot.load_bytes(data)
        self.assertEqual(region.ignored, [])
        bad = bytearray(data)
        bad[-100] ^= 0x01   # inside the last section: the compiled one
        with self.assertRaises(MagiError) as cm:
            read_opaque_sections(bytes(bad))
        self.assertEqual(cm.exception.status, "MAGI_ERR_DIGEST")
        self.assertIn("compiled", cm.exception.message)


_HOSTILE_FILES_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from magi_aot.compile import payload
print(json.dumps(payload.file_checksums(sys.argv[1:])))
"""


class TracedFiles(unittest.TestCase):
    """The header's traced_files are paths from the stored payload: only
    bounded regular files are read. Run in a child with 1 GiB of address
    space and a timeout, so reading /dev/zero or waiting on a FIFO fails
    the test instead of the machine."""

    def test_only_bounded_regular_files_are_read(self):
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "model.py")
            with open(good, "wb") as f:
                f.write(b"x = 1\n")
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo)
            big = os.path.join(d, "big.py")
            with open(big, "wb") as f:
                f.truncate(1 << 30)   # sparse: costs no disk, but past any bound
            paths = [good, fifo, "/dev/zero", big, d, os.path.join(d, "missing.py")]
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
            proc = subprocess.Popen([sys.executable, "-c", _HOSTILE_FILES_CHILD] + paths,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    text=True)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                # a reader waiting for a writer: open the FIFO once to let it go
                w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(w)
                proc.kill()
                out, err = proc.communicate()
                self.fail("file_checksums blocked on a FIFO")
            self.assertEqual(proc.returncode, 0, err[-3000:])
            got = json.loads(out)
        self.assertEqual(got[good], hashlib.sha256(b"x = 1\n").hexdigest())
        for p in paths[1:]:
            self.assertIsNone(got[p], p)

    def test_changed_files_refuses_a_malformed_record(self):
        with self.assertRaises(MagiError):
            stored_payload.changed_files(["no-such-file.py"])   # a list, not {path: sha256}


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class RestoreKernels(unittest.TestCase):
    def test_verified_bytes_replace_a_file_of_the_same_size(self):
        """A kernel library already in Inductor's cache directory is kept
        only when it holds the verified bytes: one of the same size with
        other bytes (a planted or stale .so) is replaced."""
        from unittest import mock
        good = os.urandom(4096)
        with tempfile.TemporaryDirectory() as root:
            dst = os.path.join(root, "ab", "k.so")
            os.makedirs(os.path.dirname(dst))
            with open(dst, "wb") as f:
                f.write(b"\0" * len(good))
            with mock.patch("torch._inductor.runtime.cache_dir_utils.cache_dir",
                            return_value=root):
                self.assertEqual(compiled._restore_so({"so/ab/k.so": good}), 1)
                with open(dst, "rb") as f:
                    self.assertEqual(f.read(), good)
                # the right bytes already there: kept, nothing written
                self.assertEqual(compiled._restore_so({"so/ab/k.so": good}), 0)
            self.assertEqual(sorted(os.listdir(os.path.dirname(dst))), ["k.so"])


    def test_autotune_choices_restored_beside_the_libraries(self):
        """The Triton kernels' autotune choices ("tune/REL", .best_config
        files made at store time) go where Inductor's autotune cache reads
        them, readable and not executable; a path leaving the cache
        directory is refused."""
        from unittest import mock
        cfg = b'{"XBLOCK": 128, "num_warps": 4}'
        with tempfile.TemporaryDirectory() as root:
            with mock.patch("torch._inductor.runtime.cache_dir_utils.cache_dir",
                            return_value=root):
                self.assertEqual(compiled._restore_so({"tune/cd/x.best_config": cfg}), 1)
                with self.assertRaises(MagiError):
                    compiled._restore_so({"tune/../../x.best_config": cfg})
            dst = os.path.join(root, "cd", "x.best_config")
            with open(dst, "rb") as f:
                self.assertEqual(f.read(), cfg)
            self.assertEqual(os.stat(dst).st_mode & 0o777, 0o644)
            self.assertEqual(compiled._tune_blobs(root), [("tune/cd/x.best_config", cfg)])


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class SourceKeys(unittest.TestCase):
    """torch's source-hash key recorded with stored code (keys.record) is
    answered from the record while the module loads only when the files it
    hashes are unchanged (keys.seeded), and the key function is put back
    everywhere afterwards, in modules imported meanwhile too."""

    def setUp(self):
        import torch._inductor.codecache as cc
        from magi_aot.compile import keys
        self.cc, self.keys = cc, keys
        self.orig = cc.torch_key
        self.rec = keys.record(("torch_key",))
        self.assertIn("torch_key", self.rec)
        self.assertEqual(bytes.fromhex(self.rec["torch_key"]["value"]["bytes"]), cc.torch_key())

    def test_reused_while_the_files_are_unchanged(self):
        import sys
        import types
        rep = {}
        want = b"\x01" * 32
        rec = {"torch_key": dict(self.rec["torch_key"], value={"bytes": want.hex()})}
        late = types.ModuleType("torch._inductor._magi_late_import")
        with self.keys.seeded(rec, rep):
            self.assertEqual(self.cc.torch_key(), want)
            late.torch_key = self.cc.torch_key   # a module imported during the load
            sys.modules[late.__name__] = late
        try:
            self.assertEqual(rep["torch_key"], "reused")
            self.assertIs(self.cc.torch_key, self.orig)
            self.assertIs(late.torch_key, self.orig)
            self.assertNotEqual(self.cc.torch_key(), want)
        finally:
            sys.modules.pop(late.__name__, None)

    def test_changed_files_or_a_bad_record_compute_the_key(self):
        for rec, why in (({"torch_key": dict(self.rec["torch_key"], files="0" * 64)}, "files changed"),
                         ({"torch_key": {"value": {"bytes": "zz"}, "files": "x"}}, "not recorded"),
                         ({"torch_key": "not a dict"}, "not recorded"), ("nothing", "not recorded")):
            rep = {}
            with self.keys.seeded(rec, rep):
                self.assertIs(self.cc.torch_key, self.orig)
            self.assertEqual(rep["torch_key"], why)

    def test_a_touched_file_changes_the_fingerprint(self):
        """The fingerprint is of sizes and modification times: a file of the
        package rewritten (here a copy of the package's layout in a temporary
        directory) changes it."""
        import importlib.util
        import sys
        from magi_aot.compile import keys
        with tempfile.TemporaryDirectory() as d:
            pkg = os.path.join(d, "magi_fp_pkg")
            os.makedirs(os.path.join(pkg, "sub"))
            for rel in ("__init__.py", "sub/__init__.py", "sub/m.py"):
                with open(os.path.join(pkg, rel), "w") as f:
                    f.write("x = 1\n")
            sys.path.insert(0, d)
            try:
                importlib.invalidate_caches()
                a = keys._fingerprint("magi_fp_pkg", True, ())
                self.assertEqual(a, keys._fingerprint("magi_fp_pkg", True, ()))
                with open(os.path.join(pkg, "sub", "m.py"), "w") as f:
                    f.write("x = 22\n")
                self.assertNotEqual(a, keys._fingerprint("magi_fp_pkg", True, ()))
            finally:
                sys.path.remove(d)


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class IsaProbes(unittest.TestCase):
    """Inductor's CPU vector-ISA probes (a build and a child Python each)
    are answered from the answers recorded at store time, on the same CPU."""

    def setUp(self):
        from torch._inductor import cpu_vec_isa
        self.cvi = cpu_vec_isa
        self.orig = cpu_vec_isa.VecISA.check_build
        self.calls = []
        self.probes = compiled._probe_answers()
        self.recorded = self.probes["isa"]
        if not self.probes["answers"]:
            self.skipTest("this torch or CPU runs no ISA probe (vec_isa_ok set, or not x86/arm)")

        def counting(isa, code):
            self.calls.append(type(isa).__name__)
            return self.orig(isa, code)
        cpu_vec_isa.VecISA.check_build = counting
        compiled._isa_module()[1]()   # Inductor's choices forgotten: the load probes

    def tearDown(self):
        self.cvi.VecISA.check_build = self.orig
        compiled._isa_module()[1]()

    def test_answered_from_the_record_on_the_same_cpu(self):
        with compiled._known_vec_isa(self.recorded, self.probes):
            picked = str(self.cvi.pick_vec_isa())
        self.assertEqual(picked, self.recorded)
        self.assertEqual(self.calls, [])
        self.assertEqual(self.cvi.VecISA.check_build.__name__, "counting")  # put back

    def test_probe_missing_from_the_record_runs(self):
        probes = dict(self.probes, answers={"not a probe": True})
        with compiled._known_vec_isa(self.recorded, probes):
            self.assertEqual(str(self.cvi.pick_vec_isa()), self.recorded)
        self.assertGreater(len(self.calls), 0)

    def test_record_of_another_cpu_is_not_used(self):
        # every answer "no": used, it would pick no ISA; a record of another
        # CPU is ignored and the CPU's own flags pick the recorded ISA
        # (vec_isa_ok set inside: the recorded ISA was confirmed, the module's
        # kernels load without probes)
        from torch._inductor import config
        probes = {"cpu": "another cpu", "answers": {k: False for k in self.probes["answers"]}}
        with compiled._known_vec_isa(self.recorded, probes):
            self.assertIs(config.cpp.vec_isa_ok, True)
            self.assertEqual(str(self.cvi.pick_vec_isa()), self.recorded)
        probes["cpu"] = self.probes["cpu"]
        self.calls.clear()
        with compiled._known_vec_isa(self.recorded, probes):
            self.assertIsNot(config.cpp.vec_isa_ok, True)   # the "no" answers were used
        self.assertEqual(self.calls, [])


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class StoreTimeTuning(unittest.TestCase):
    """The store-time run that lets Inductor autotune a GPU region's Triton
    kernels (code._tune_once), forced here onto a CPU region's C++ kernels
    (its marker patched): with a dimension marked dynamic it runs on the
    sizes' hints without specialising Dynamo's guards (a second length
    reuses the one graph; an int() of the SymInt input would have made the
    compile fail with a constraint violation), and a region holding a
    collective is not run."""

    def test_dynamic_region_runs_without_specialising(self):
        from unittest import mock
        import torch
        from magi_aot.compile.backend import SaveBackend
        from torch._dynamo.utils import counters
        torch._dynamo.reset()
        counters.clear()
        tmp = tempfile.mkdtemp(prefix="magi-tune-")
        self.addCleanup(shutil.rmtree, tmp, True)
        ran = []
        orig = compiled._tune_once

        def spy(*a, **k):
            why = orig(*a, **k)
            ran.append(why)
            return why

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                return torch.relu(self.fc(x)).sum(-1)
        torch.manual_seed(0)
        m = M().eval()
        be = SaveBackend(os.path.join(tmp, "cache"), "tune", store_code=True, strict=True,
                         compiler="inductor")
        x = torch.randn(3, 5, 8)
        torch._dynamo.mark_dynamic(x, 1)
        x2 = torch.randn(3, 9, 8)
        with mock.patch.object(compiled, "TUNE_MARKER", "async_compile"), \
                mock.patch.object(compiled, "_tune_once", spy), torch.no_grad():
            f = torch.compile(m, backend=be)
            y, y2 = f(x), f(x2)
            torch.testing.assert_close(y, m(x))
            torch.testing.assert_close(y2, m(x2))
        self.assertEqual(ran, [None])
        self.assertEqual(counters["stats"]["unique_graphs"], 1)

    def test_a_region_with_a_collective_is_not_run(self):
        import torch

        def f(x):
            return torch.ops._c10d_functional.wait_tensor(x + 1)
        gm = torch.fx.symbolic_trace(f)

        class G:
            source_code = "x = async_compile.triton('k', '...')"
        ran = []
        with torch.no_grad():
            why = compiled._tune_once(lambda *a: ran.append(a), gm, [torch.ones(2)], [(G(), None)], None)
        self.assertIn("collective", why)
        self.assertEqual(ran, [])


class _FakeRegion:
    def __init__(self, fp, n_rewritten=0, transport="nccl"):
        self.doc = {"graph": {"nodes": []}}
        self.fingerprint = fp
        self.n_rewritten = n_rewritten
        self.n_restored = 0
        self.transport = transport


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class Keys(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.src = os.path.join(self.tmp.name, "model.py")
        with open(self.src, "w") as f:
            f.write("x = 1\n")

    def payload(self, fp="f" * 64, transport="as_saved"):
        key = stored_keys.environment_key("cpu", fp, transport)
        return stored_payload.pack(stored_payload.make_header(key, [self.src], []), [("standalone", b"")])

    def test_match(self):
        h, _, why = compiled.choose(_FakeRegion("f" * 64), [self.payload()], "as_saved")
        self.assertIsNone(why)
        self.assertIsNotNone(h)

    def test_simulated_field_named(self):
        stored = self.payload()
        os.environ[stored_keys.SIMULATE_ENV] = "torch=0.0-simulated"
        try:
            h, _, why = compiled.choose(_FakeRegion("f" * 64), [stored], "as_saved")
        finally:
            del os.environ[stored_keys.SIMULATE_ENV]
        self.assertIsNone(h)
        self.assertIn("key 'torch' differs", why)
        self.assertIn("0.0-simulated", why)

    def test_transport_rewrite_named(self):
        """Code stored for the graph as saved is not served to a region the
        load rewrote (copy-engine gathers): fingerprint and transport differ."""
        from unittest import mock
        with mock.patch("magi_aot.compile.code.fingerprint_of", return_value="e" * 64):
            h, _, why = compiled.choose(_FakeRegion("f" * 64, n_rewritten=3,
                                                    transport="copy_engine"),
                                        [self.payload()], "copy_engine")
        self.assertIsNone(h)
        self.assertIn("key 'transport' differs: stored 'as_saved', running 'copy_engine'", why)
        self.assertIn("key 'fingerprint' differs", why)

    def test_second_variant_used(self):
        """Of two stored variants the one matching the running key is served."""
        other = stored_payload.pack(stored_payload.make_header(
            dict(stored_keys.environment_key("cpu", "f" * 64, "as_saved"), device="cuda:sm_90"),
            [self.src], []), [("standalone", b"other")])
        mine = stored_payload.pack(stored_payload.make_header(
            stored_keys.environment_key("cpu", "f" * 64, "as_saved"), [self.src], []),
            [("standalone", b"mine")])
        h, blobs, why = compiled.choose(_FakeRegion("f" * 64), [other, mine], "as_saved")
        self.assertIsNone(why)
        self.assertEqual(blobs["standalone"], b"mine")

    def test_changed_source_named(self):
        p = self.payload()
        with open(self.src, "a") as f:
            f.write("# edited\n")
        h, _, why = compiled.choose(_FakeRegion("f" * 64), [p], "as_saved")
        self.assertIsNone(h)
        self.assertIn("source changed", why)
        self.assertIn(self.src, why)


class Sources(unittest.TestCase):
    def test_forms(self):
        from magi_aot.compile.warm import parse_source
        root, steps = parse_source("L['self']._modules['layers']._modules['0']._parameters['weight']")
        self.assertEqual(root, "self")
        self.assertEqual(steps, [("module", "layers"), ("module", "0"), ("param", "weight")])
        self.assertEqual(parse_source("L['args'][0].size()[1]"),
                         ("args", [("index", 0), ("size", 1)]))
        self.assertEqual(parse_source("L['self'].rot._buffers['inv_freq']"),
                         ("self", [("attr", "rot"), ("buffer", "inv_freq")]))
        for bad in ("G['torch'].x", "L['x'].foo()", "", None):
            with self.assertRaises(MagiError):
                parse_source(bad)


class _Layer:
    def __init__(self, k, v):
        self.keys, self.values, self.dtype, self.ready = k, v, None, True


class _Slotted:
    __slots__ = ("x",)


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class ReturnValue(unittest.TestCase):
    """warm_start's record of what the model returned: every tensor one of
    the region's outputs or an argument, rebuilt around new outputs."""

    def test_round_trip(self):
        import collections
        import torch
        from magi_aot.compile.warm import OutputTree, encode_output
        Pair = collections.namedtuple("Pair", "a b")
        globals()["Pair"] = Pair   # an imported class, as a model's would be
        Pair.__module__, Pair.__qualname__ = __name__, "Pair"
        outs = [torch.ones(2), torch.zeros(3), torch.full((1,), 7.0)]
        arg = torch.arange(4)
        layer = _Layer(outs[1], outs[2])
        layer.dtype = torch.float16
        ret = {"logits": outs[0], "cache": [layer, layer], "pair": Pair(outs[2], None),
               "echo": (arg, 3, "s", torch.device("cpu"))}
        tree = json.loads(json.dumps(encode_output(ret, outs, (arg,), {})))
        new = [o + 1 for o in outs]
        got = OutputTree(tree).build(new, (arg,), {})
        self.assertEqual(list(got), ["logits", "cache", "pair", "echo"])
        self.assertIs(got["logits"], new[0])
        self.assertIsInstance(got["cache"][0], _Layer)
        self.assertIs(got["cache"][0], got["cache"][1])     # one object, twice
        self.assertIs(got["cache"][0].values, new[2])
        self.assertEqual(got["cache"][0].dtype, torch.float16)
        self.assertIsInstance(got["pair"], Pair)
        self.assertIs(got["pair"].a, new[2])
        self.assertEqual(got["echo"][1:], (3, "s", torch.device("cpu")))
        self.assertIs(got["echo"][0], arg)

    def test_refusals_name_the_path(self):
        import torch
        from magi_aot.compile.warm import OutputTree, encode_output
        outs = [torch.ones(2)]
        with self.assertRaises(MagiError) as cm:
            encode_output({"h": [outs[0], torch.zeros(1)]}, outs, (), {})
        self.assertIn("output['h'][1]: a tensor that is neither", cm.exception.message)
        with self.assertRaises(MagiError) as cm:
            encode_output((outs[0], _Slotted()), outs, (), {})
        self.assertIn("output[1]: a test_warm._Slotted", cm.exception.message)
        # a class the index names but this process has not imported
        tree = {"t": "object", "type": "no_such_module.Cls", "keys": [], "items": []}
        with self.assertRaises(MagiError) as cm:
            OutputTree(tree).build(outs, (), {})
        self.assertIn("no_such_module.Cls is not an imported class", cm.exception.message)


def _stand_in_compile(gm, example_inputs):
    """SaveBackend._compile without Inductor: the graph runs eagerly in
    this process and the stored payload is a stand-in under the running
    key (what an attacker's pickle would be to the loader)."""
    def build(doc, fp, traced):
        key = stored_keys.environment_key(stored_keys.region_device(doc), fp, "as_saved")
        return stored_payload.pack(stored_payload.make_header(key, traced, []),
                                   [("standalone", b"stand-in for the attacker's pickle")])
    return gm.forward, (build, 0.0)


class _StoredCode(unittest.TestCase):
    """A model traced by Dynamo for real into a cache with a stand-in
    payload; CompiledArtifact.load (the unpickler) and the compile from the
    graph replaced by recorders, so a test shows which one would run."""

    def setUp(self):
        import torch
        self.torch = torch
        torch._dynamo.reset()
        self.tmp = tempfile.mkdtemp(prefix="magi-trust-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.saved_env = os.environ.pop("MAGI_AOT_TRUST_COMPILED", None)
        self.addCleanup(self._restore_env)

    def _restore_env(self):
        os.environ.pop("MAGI_AOT_TRUST_COMPILED", None)
        if self.saved_env is not None:
            os.environ["MAGI_AOT_TRUST_COMPILED"] = self.saved_env

    def model(self):
        torch = self.torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))
        torch.manual_seed(0)
        return M()

    def store(self, cache, shared=False):
        """Trace the model into `cache` with a stand-in payload under the
        running key (group-shared first when asked: chmod 2775)."""
        from unittest import mock
        from magi_aot.compile.backend import SaveBackend
        torch = self.torch
        if shared:
            os.makedirs(cache)
            os.chmod(cache, 0o2775)
        be = SaveBackend(cache, "trust", store_code=True, strict=True)
        with mock.patch.object(be, "_compile", _stand_in_compile):
            torch.compile(self.model(), backend=be)(torch.ones(2, 4))
        self.assertEqual(len(be.entries), 1, be.entries)
        self.assertIsNone(be.entries[0].error)
        return be.entries[0].key

    def bind(self, cache, **kw):
        from unittest import mock
        loads, compiles = [], []

        def fake_load(path, format):
            loads.append(path)
            return lambda *a: ("stored",)

        def fake_compile_from_graph(region, timings, grad_enabled=False, allow_targets=()):
            compiles.append(region)
            return lambda *a: ("compiled",)
        with mock.patch("torch._inductor.standalone_compile.CompiledArtifact.load", fake_load), \
                mock.patch("magi_aot.compile.code.compile_from_graph", fake_compile_from_graph):
            fwd = magi_aot.warm_start(self.model(), cache, "trust", **kw)
        return fwd.report, loads, compiles


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class Trust(_StoredCode):
    """Stored code is code: warm_start loads it only from a cache entry
    only this user can have written, or on an explicit opt-in; otherwise it
    compiles the region from its graph and says why."""

    def test_own_cache_serves_stored_code(self):
        cache = os.path.join(self.tmp, "own")
        self.store(cache)
        rep, loads, compiles = self.bind(cache)
        self.assertEqual(rep["served"], "stored", rep)
        self.assertIsNone(rep["untrusted"])
        self.assertEqual((len(loads), len(compiles)), (1, 0))

    def test_group_shared_cache_compiles_from_the_graph(self):
        cache = os.path.join(self.tmp, "shared")
        self.store(cache, shared=True)
        rep, loads, compiles = self.bind(cache)
        self.assertEqual(loads, [], "stored code from a group-shared cache was unpickled")
        self.assertEqual(rep["served"], "compiled", rep)
        self.assertEqual(len(compiles), 1)
        self.assertIn("stored code not loaded", rep["reason"])
        self.assertIn("2775", rep["reason"])
        self.assertIn("trust_compiled", rep["reason"])
        # an explicit opt-in loads it: the argument, or the environment
        rep, loads, _ = self.bind(cache, trust_compiled=True)
        self.assertEqual((rep["served"], len(loads)), ("stored", 1))
        os.environ["MAGI_AOT_TRUST_COMPILED"] = "1"
        rep, loads, _ = self.bind(cache)
        self.assertEqual((rep["served"], len(loads)), ("stored", 1))
        rep, loads, _ = self.bind(cache, trust_compiled=False)
        self.assertEqual((rep["served"], len(loads)), ("compiled", 0))

    def test_no_file_a_stranger_names_is_read_before_trust(self):
        """Hashing the traced files of an untrusted header would let its
        writer learn whether a file of this user's holds what they
        guessed (by whether the process re-traces): trust comes first."""
        from unittest import mock
        real = stored_payload.file_checksums
        for shared in (True, False):
            with self.subTest(shared=shared):
                cache = os.path.join(self.tmp, "shared" if shared else "own")
                self.store(cache, shared=shared)
                hashed, chosen = [], []
                real_choose = compiled.choose

                def spy(recorded):
                    hashed.append(sorted(recorded))
                    return real(recorded)

                def count(*a, **k):
                    chosen.append(1)
                    return real_choose(*a, **k)
                with mock.patch("magi_aot.compile.payload.file_checksums", spy), \
                        mock.patch("magi_aot.compile.warm.choose", count):
                    rep, loads, compiles = self.bind(cache)
                self.assertEqual(len(chosen), 1, "the stored code chosen more than once")
                if shared:
                    self.assertEqual(hashed, [], "files named by an untrusted header were read")
                    self.assertEqual(rep["served"], "compiled")
                else:
                    self.assertEqual(len(hashed), 1)
                    self.assertEqual(rep["served"], "stored")

    def test_entry_others_can_write_is_not_loaded(self):
        cache = os.path.join(self.tmp, "own")
        key = self.store(cache)
        os.chmod(os.path.join(cache, "v1", "entries", key), 0o666)
        rep, loads, compiles = self.bind(cache)
        self.assertEqual(loads, [])
        self.assertEqual(rep["served"], "compiled", rep)
        self.assertIn("every user", rep["reason"])
        self.assertIn(key, rep["reason"])

    def test_payloads_of_unknown_origin_are_not_loaded(self):
        """load_region_code's default: nobody said who wrote them."""
        from unittest import mock
        region = _FakeRegion("f" * 64)
        key = stored_keys.environment_key("cpu", "f" * 64, "as_saved")
        p = stored_payload.pack(stored_payload.make_header(key, [], []), [("standalone", b"x")])
        with mock.patch("magi_aot.compile.code.load_standalone") as ls, \
                mock.patch("magi_aot.compile.code.compile_from_graph", return_value="fn") as cg:
            fn, rep = compiled.load_region_code(region, [p])
        ls.assert_not_called()
        cg.assert_called_once()
        self.assertEqual(rep["served"], "compiled")
        self.assertIn("stored code not loaded", rep["reason"])


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class ContainerModel(_StoredCode):
    """torch.nn's containers (nn.Sequential) are traced through
    torch.compile's wrapper, whose local `fn` is the module: its weights'
    sources are L['fn']._modules['0']..., bound to the model."""

    def model(self):
        torch = self.torch
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())

    def test_sequential_binds_from_the_cache(self):
        from magi_aot.cache import read_index
        cache = os.path.join(self.tmp, "own")
        self.store(cache)
        roots = {s["source"].split("]")[0] for s in read_index(cache, "trust")["regions"][0]["sources"]}
        self.assertIn("L['fn'", roots)
        rep, loads, compiles = self.bind(cache)
        self.assertEqual((rep["served"], len(loads)), ("stored", 1), rep)


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class CpuGenerations(_StoredCode):
    """Stored CPU kernels are built with -march=native: another CPU of the
    same ATen capability class but other instruction-set flags (an older
    AVX-512 generation without VBMI or AVX512-FP16) compiles the region
    instead of loading them."""

    def test_other_cpu_flags_compile_instead_of_loading(self):
        from unittest import mock
        cache = os.path.join(self.tmp, "own")
        self.store(cache)
        rep, loads, _ = self.bind(cache)
        self.assertEqual((rep["served"], len(loads)), ("stored", 1), rep)
        here = stored_keys._cpu_fields()
        self.assertIsNotNone(here, "this CPU's flags cannot be read")
        other = dict(here, flags=" ".join(f for f in here["flags"].split()
                                          if not f.startswith(("avx512", "amx", "avx_vnni"))) + " fake_isa")
        with mock.patch("magi_aot.compile.keys._cpu_fields", return_value=other):
            rep, loads, compiles = self.bind(cache)
        self.assertEqual((rep["served"], len(loads), len(compiles)), ("compiled", 0, 1), rep)
        self.assertIn("key 'device' differs", rep["reason"])


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class CallChecks(_StoredCode):
    """A process that loaded stored code runs no Dynamo, so it checks each
    call as the guards would: a size outside the symbol's range, or one
    that breaks a shape guard, is refused naming the input's dimension
    (code compiled for other sizes is never run)."""

    def model(self):
        torch = self.torch

        class Halves(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x).reshape(x.shape[0] // 2, 2, 4).sum(1)
        torch.manual_seed(0)
        return Halves()

    def test_range_and_guard_refusals_name_the_dimension(self):
        from unittest import mock
        from magi_aot.compile.backend import SaveBackend
        torch = self.torch
        cache = os.path.join(self.tmp, "own")

        def fake_compile(be, gm, example_inputs):
            return _stand_in_compile(gm, example_inputs)
        calls = []

        def fake_load(path, format):
            def run(*a):
                calls.append(a)
                return (torch.zeros(a[-1].shape[0] // 2, 4),)
            return run
        x = torch.ones(6, 4)
        torch._dynamo.mark_dynamic(x, 0)
        with mock.patch.object(SaveBackend, "_compile", fake_compile), torch.no_grad(), \
                mock.patch("torch._inductor.standalone_compile.CompiledArtifact.load", fake_load):
            magi_aot.warm_start(self.model(), cache, "trust")(x)
        calls.clear()
        from magi_aot.cache import read_index
        shapes = read_index(cache, "trust")["regions"][0].get("shapes")
        self.assertIsNotNone(shapes, "the trace recorded no ranges or guards")
        self.assertEqual(list(shapes["ranges"].values()), [[2, None]])
        with mock.patch("torch._inductor.standalone_compile.CompiledArtifact.load", fake_load):
            fwd = magi_aot.warm_start(self.model(), cache, "trust", on_miss="raise")
            self.assertEqual(fwd.report["served"], "stored", fwd.report)
            fwd(torch.ones(8, 4))                      # in range, guards hold: runs
            self.assertEqual(len(calls), 1)
            for n, words in ((1, "compiled for"), (7, "shape guard")):
                with self.subTest(batch=n):
                    with self.assertRaises(MagiError) as cm:
                        fwd(torch.ones(n, 4))
                    self.assertEqual(cm.exception.status, "MAGI_ERR_MISMATCH")
                    self.assertIn("L['x'].size()[0]", cm.exception.message)
                    self.assertIn(words, cm.exception.message)
            self.assertEqual(len(calls), 1, "code compiled for other sizes ran")


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class GradMode(unittest.TestCase):
    """Stored inference code under grad mode (magi_aot.compile.grad): the
    outputs carry autograd as eager's do, a backward recomputes the
    forward from the region's graph and gives eager's gradients, and a
    graph that cannot be had makes the backward raise, naming why."""

    def setUp(self):
        import torch
        self.torch = torch
        torch.manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(3, 4))
        self.x = torch.randn(5, 4)
        self.ran = []

    @staticmethod
    def graph(w, x):
        import torch
        y = torch.relu(x @ w.t())
        return (y, y.sum(1), (y > 0).sum())

    def inference(self, *a):
        import torch
        self.ran.append(torch.is_grad_enabled())
        with torch.no_grad():
            return list(self.graph(*a))

    def test_outputs_and_gradients_are_eagers(self):
        from magi_aot.compile.grad import with_autograd
        torch = self.torch
        made = []
        call = with_autograd(self.inference, lambda: made.append(1) or self.graph)
        y, s, n = call(self.w, self.x)
        self.assertTrue(y.requires_grad and s.requires_grad)
        self.assertFalse(n.requires_grad)        # an integer output, as in eager
        self.assertEqual(self.ran, [False])      # the inference code, without autograd
        self.assertEqual(made, [])               # the graph only for a backward
        (y.pow(2).sum() + s.sum()).backward()
        got = self.w.grad.clone()
        self.w.grad = None
        ey, es, _ = self.graph(self.w, self.x)
        (ey.pow(2).sum() + es.sum()).backward()
        self.assertTrue(torch.allclose(got, self.w.grad, atol=1e-6))
        self.assertEqual(made, [1])
        with torch.no_grad():
            self.assertFalse(call(self.w, self.x)[0].requires_grad)
        with torch.inference_mode():
            self.assertFalse(call(self.w, self.x)[0].requires_grad)
        frozen = self.w.detach()
        self.assertIsNone(call(frozen, self.x)[0].grad_fn)   # nothing requires grad

    def test_graph_that_cannot_be_had_raises_at_backward(self):
        from magi_aot.compile.grad import with_autograd

        def refused():
            raise MagiError(-13, "target 'evil.fn' is not on the allow-list")
        call = with_autograd(self.inference, refused, "model 'm'")
        y, _, _ = call(self.w, self.x)
        with self.assertRaises(MagiError) as cm:
            y.sum().backward()
        self.assertIn("model 'm': backward recomputes the forward", cm.exception.message)
        self.assertIn("evil.fn", cm.exception.message)
        self.assertIsNone(self.w.grad)


def _sized_zeros(*a):
    """The stand-in code's output: zeros of (the call's batch, 4)."""
    import torch
    x = [t for t in a if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter)]
    return (torch.zeros(x[-1].shape[0], 4),)


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class MissCompiles(_StoredCode):
    """A process that loaded stored code meets a call that code cannot
    serve (a new size, another configuration under the same tag): at the
    default it compiles it as torch.compile would (the changed dimension
    dynamic), serves it and stores it beside the stored code, so the next
    process serves both without compiling; on_miss="raise" (or
    MAGI_AOT_ON_MISS=raise) refuses it as before."""

    def setUp(self):
        super().setUp()
        self.saved_miss = os.environ.pop("MAGI_AOT_ON_MISS", None)
        self.addCleanup(self._restore_miss)

    def _restore_miss(self):
        os.environ.pop("MAGI_AOT_ON_MISS", None)
        if self.saved_miss is not None:
            os.environ["MAGI_AOT_ON_MISS"] = self.saved_miss

    def model(self, width=4):
        torch = self.torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(width, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))
        torch.manual_seed(0)
        return M()

    def process(self, cache, model, xs, **kw):
        """A fresh process's warm start (Dynamo forgotten) calling model on
        each x: ([(served, recompiles so far)], regions the backend saved)."""
        from unittest import mock
        from magi_aot.compile.backend import SaveBackend
        torch = self.torch
        torch._dynamo.reset()
        saved = []
        real = SaveBackend.__call__

        def counting(be, gm, example_inputs):
            saved.append([tuple(p.meta["example_value"].shape) for p in gm.graph.nodes
                          if p.op == "placeholder" and p.name.endswith("x_")])
            return real(be, gm, example_inputs)

        def fake_compile(be, gm, example_inputs):
            return _stand_in_compile(gm, example_inputs)
        seen = []
        with mock.patch.object(SaveBackend, "_compile", fake_compile), \
                mock.patch.object(SaveBackend, "__call__", counting), torch.no_grad(), \
                mock.patch("torch._inductor.standalone_compile.CompiledArtifact.load",
                           lambda path, format: _sized_zeros):
            fwd = magi_aot.warm_start(model, cache, "miss", **kw)
            for x in xs:
                fwd(x)
                seen.append((fwd.report["served"], len(fwd.report["recompiles"])))
        return seen, saved, fwd

    def test_new_size_compiled_stored_beside_and_served_next(self):
        from magi_aot.cache import read_index
        torch = self.torch
        cache = os.path.join(self.tmp, "own")
        seen, saved, _ = self.process(cache, self.model(), [torch.ones(3, 4)])
        self.assertEqual((seen, saved), ([("traced", 0)], [[(3, 4)]]))
        # a loaded process: 3 from the stored code, 5 compiled here with dim 0 dynamic
        seen, saved, fwd = self.process(cache, self.model(), [torch.ones(3, 4), torch.ones(5, 4),
                                                              torch.ones(7, 4)])
        # (7: the new dynamic code, no further compile; "served" says this
        # process traced)
        self.assertEqual(seen, [("stored", 0), ("traced", 1), ("traced", 1)])
        self.assertIn("L['x'] dim 0 is 5; the stored code was compiled for 3 only",
                      fwd.report["recompiles"][0])
        self.assertEqual(len(saved), 1)
        self.assertIsInstance(saved[0][0][0], torch.SymInt)   # the changed dim, dynamic
        idx = read_index(cache, "miss")
        self.assertEqual(len(idx["regions"]), 1)
        self.assertEqual(len(idx["variants"]), 1)     # the size-3 code, beside the new one
        self.assertNotEqual(idx["regions"][0]["key"], idx["variants"][0]["key"])
        # the next process serves every size from stored code, compiling nothing
        seen, saved, _ = self.process(cache, self.model(), [torch.ones(3, 4), torch.ones(5, 4),
                                                            torch.ones(9, 4)])
        self.assertEqual((seen, saved), ([("stored", 0)] * 3, []))

    def test_on_miss_raise_refuses_as_before(self):
        torch = self.torch
        cache = os.path.join(self.tmp, "own")
        self.process(cache, self.model(), [torch.ones(3, 4)])
        for how in ("keyword", "environment"):
            with self.subTest(how=how):
                kw = {"on_miss": "raise"} if how == "keyword" else {}
                if how == "environment":
                    os.environ["MAGI_AOT_ON_MISS"] = "raise"
                with self.assertRaises(MagiError) as cm:
                    self.process(cache, self.model(), [torch.ones(5, 4)], **kw)
                self.assertEqual(cm.exception.status, "MAGI_ERR_MISMATCH")
                self.assertIn("L['x'] dim 0 is 5; the stored code was compiled for 3 only",
                              cm.exception.message)
                self.assertIn("on_miss='raise'", cm.exception.message)
        with self.assertRaises(ValueError):
            magi_aot.warm_start(self.model(), cache, "miss", on_miss="never")
        os.environ["MAGI_AOT_ON_MISS"] = "sometimes"
        with self.assertRaisesRegex(ValueError, "MAGI_AOT_ON_MISS"):
            magi_aot.warm_start(self.model(), cache, "miss")

    def test_changed_configuration_stored_beside(self):
        from magi_aot.cache import read_index
        torch = self.torch
        cache = os.path.join(self.tmp, "own")
        self.process(cache, self.model(4), [torch.ones(3, 4)])
        with self.assertRaises(MagiError) as cm:
            self.process(cache, self.model(8), [torch.ones(3, 8)], on_miss="raise")
        self.assertIn("_parameters['weight']: shape [4, 8], the region was compiled for [4, 4]",
                      cm.exception.message)
        self.assertIn("another model_tag", cm.exception.message)
        seen, saved, fwd = self.process(cache, self.model(8), [torch.ones(3, 8)])
        self.assertEqual(seen, [("traced", 0)])
        self.assertIn("the stored code does not fit the model", fwd.report["reason"])
        self.assertEqual(len(read_index(cache, "miss")["variants"]), 1)
        for width in (4, 8):
            with self.subTest(width=width):
                seen, saved, _ = self.process(cache, self.model(width), [torch.ones(3, width)])
                self.assertEqual((seen, saved), ([("stored", 0)], []))


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class ForgedIndex(_StoredCode):
    """The model's index is data from the cache: a member of a
    group-shared cache who rewrites it cannot make the warm start call a
    class of their choosing (the return value names classes)."""

    def forge(self, cache, tree):
        from magi_aot.cache import _Cache, index_key, read_index
        idx = read_index(cache, "trust")
        idx["regions"][0]["outputs"] = tree
        with _Cache(cache) as c:
            c.put(index_key("trust"), json.dumps(idx).encode(), replace=True)

    def test_popen_as_a_namedtuple_never_runs(self):
        marker = os.path.join(self.tmp, "pwned")
        popen = {"t": "namedtuple", "type": "subprocess.Popen",
                 "items": [{"t": "const", "v": ["sh", "-c", "touch " + marker]}]}
        for shared in (True, False):
            with self.subTest(shared=shared):
                cache = os.path.join(self.tmp, "shared" if shared else "own")
                self.store(cache, shared=shared)
                self.forge(cache, popen)
                rep, loads, compiles = self.bind(cache)
                self.assertFalse(os.path.exists(marker), "the index ran a command")
                self.assertIn("subprocess.Popen is not a namedtuple", rep["reason"])
                self.assertEqual((loads, compiles), ([], []))

    def test_objects_of_other_packages_only_from_ones_own_index(self):
        # a plain class from outside the model's package (here: of the
        # standard library), rebuilt with object.__new__
        tree = {"t": "object", "type": "argparse.Namespace", "keys": [], "items": []}
        cache = os.path.join(self.tmp, "shared")
        self.store(cache, shared=True)
        self.forge(cache, tree)
        rep, loads, compiles = self.bind(cache)
        self.assertIn("not from the model's package", rep["reason"])
        self.assertEqual(compiles, [])
        # trusting the cache, or one's own cache: the same tree binds
        rep, loads, compiles = self.bind(cache, trust_compiled=True)
        self.assertEqual(rep["served"], "stored", rep)
        cache = os.path.join(self.tmp, "own")
        self.store(cache)
        self.forge(cache, tree)
        rep, _, _ = self.bind(cache)
        self.assertEqual(rep["served"], "stored", rep)

    def test_what_a_tree_may_name(self):
        import collections
        import subprocess
        import torch
        from magi_aot.compile.warm import OutputTree
        out = [torch.ones(1)]

        def refused(tree, words):
            with self.assertRaises(MagiError) as cm:
                OutputTree(tree)
            self.assertIn(words, cm.exception.message)
        refused({"t": "namedtuple", "type": "subprocess.Popen", "items": []}, "not a namedtuple")
        refused({"t": "object", "type": "subprocess.Popen", "keys": [], "items": []},
                "has a __del__")
        refused({"t": "node", "type": "subprocess.Popen", "context": None, "items": []},
                "not a registered pytree node")
        refused({"t": "dtype", "v": "load"}, "not a torch dtype")
        refused({"t": "list", "items": [{"t": "eval", "v": "1"}]}, "unknown tree node")
        self.assertTrue(subprocess)  # imported: the refusals are not "not imported"
        # a real namedtuple is rebuilt without calling the class
        calls = []

        class P(collections.namedtuple("P", "a b")):
            __slots__ = ()

            def __new__(cls, *a):
                calls.append(a)
                return super().__new__(cls, *a)
        globals()["P"] = P
        P.__module__, P.__qualname__ = __name__, "P"
        got = OutputTree({"t": "namedtuple", "type": __name__ + ".P",
                          "items": [{"t": "out", "i": 0}, {"t": "const", "v": 3}]}).build(
            out, (), {})
        self.assertIsInstance(got, P)
        self.assertEqual((got.a, got.b, calls), (out[0], 3, []))


_DIRECT_OK = json.dumps({"version": 1, "eligible": True, "why": None,
                         "inputs_to_check": []}).encode()
_DIRECT_PY = b"""
import os
os.environ["MAGI_TEST_DIRECT_RAN"] = "1"
def call(args):
    args.clear()
    return ("direct",)
"""


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class DirectModule(_StoredCode):
    """Stored code loads as Inductor's generated module run directly (no
    CompiledArtifact.load) when the payload carries one; a payload without
    it, one stored not directly loadable, or a module that fails to load
    is served by the standalone artifact, and the report says which path
    served and why. A module from a cache others can write is never run."""

    def setUp(self):
        super().setUp()
        os.environ.pop("MAGI_TEST_DIRECT_RAN", None)
        self.addCleanup(os.environ.pop, "MAGI_TEST_DIRECT_RAN", None)

    def store_with(self, cache, blobs, shared=False):
        from unittest import mock
        real = stored_payload.pack

        def pack(header, bl):
            return real(header, list(bl) + blobs)
        with mock.patch("magi_aot.compile.payload.pack", pack):
            return self.store(cache, shared)

    def test_direct_module_serves(self):
        cache = os.path.join(self.tmp, "own")
        self.store_with(cache, [("direct.json", _DIRECT_OK), ("direct.py", _DIRECT_PY)])
        rep, loads, compiles = self.bind(cache)
        self.assertEqual((rep["served"], rep["code_path"]), ("stored", "direct"), rep)
        self.assertIsNone(rep["code_path_reason"])
        self.assertEqual((len(loads), len(compiles)), (0, 0))
        self.assertEqual(os.environ.get("MAGI_TEST_DIRECT_RAN"), "1")

    def test_group_shared_cache_never_runs_the_module(self):
        cache = os.path.join(self.tmp, "shared")
        self.store_with(cache, [("direct.json", _DIRECT_OK), ("direct.py", _DIRECT_PY)],
                        shared=True)
        rep, loads, compiles = self.bind(cache)
        self.assertIsNone(os.environ.get("MAGI_TEST_DIRECT_RAN"))
        self.assertEqual((rep["served"], len(loads), len(compiles)), ("compiled", 0, 1))

    def test_fallbacks_name_the_reason(self):
        bad = json.dumps({"version": 1, "eligible": False,
                          "why": "output 1 is alias_of_input"}).encode()
        cases = [([], "no directly loadable module stored"),
                 ([("direct.json", bad)], "output 1 is alias_of_input"),
                 ([("direct.json", _DIRECT_OK), ("direct.py", b"raise RuntimeError('boom')")],
                  "did not load: RuntimeError: boom"),
                 ([("direct.json", _DIRECT_OK)], "direct.py missing"),
                 ([("direct.json", _DIRECT_OK), ("direct.py", _DIRECT_PY)],
                  "MAGI_AOT_DIRECT=0")]
        for i, (blobs, why) in enumerate(cases):
            with self.subTest(why=why):
                cache = os.path.join(self.tmp, "c%d" % i)
                self.store_with(cache, blobs)
                if why.startswith("MAGI_AOT_DIRECT"):
                    os.environ["MAGI_AOT_DIRECT"] = "0"
                    self.addCleanup(os.environ.pop, "MAGI_AOT_DIRECT", None)
                rep, loads, _ = self.bind(cache)
                self.assertEqual((rep["served"], rep["code_path"], len(loads)),
                                 ("stored", "standalone", 1), rep)
                self.assertIn(why, rep["code_path_reason"])
        self.assertIsNone(os.environ.get("MAGI_TEST_DIRECT_RAN"))

    def test_direct_call(self):
        """Misaligned inputs Inductor asked to check are copied aligned,
        and the call runs with grad off."""
        torch = self.torch
        seen = []

        def call(args):
            seen.append((args[0].data_ptr() % 16, torch.is_grad_enabled()))
            return (args[0] + 1,)
        base = torch.zeros(9)
        fn = compiled.DirectCall(call, [0])
        out = fn(base[1:])
        self.assertEqual(seen, [(0, False)])
        self.assertIsInstance(out, list)
        self.assertTrue(torch.equal(out[0], torch.ones(8)))


def _run_child(cache, model_py, state, out, *extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "warm_child.py"), cache, model_py,
                           state, out] + list(extra), capture_output=True, text=True, env=env,
                          timeout=900)
    if proc.returncode != 0:
        raise AssertionError("child failed (%d):\n%s\n%s" % (proc.returncode, proc.stdout[-3000:],
                                                            proc.stderr[-6000:]))
    with open(out) as f:
        return json.load(f)


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class TritonCache(unittest.TestCase):
    """use_triton_cache: Triton's cache goes inside a private magi cache,
    never into a directory others can write, never over the process's own
    choice."""

    def setUp(self):
        self.saved = os.environ.pop("TRITON_CACHE_DIR", None)
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def tearDown(self):
        os.environ.pop("TRITON_CACHE_DIR", None)
        if self.saved is not None:
            os.environ["TRITON_CACHE_DIR"] = self.saved

    def test_private_cache_hosts_it(self):
        cache = os.path.join(self.tmp, "cache")
        got = compiled.use_triton_cache(cache)
        self.assertEqual(got, os.path.join(cache, compiled.TRITON_DIR))
        self.assertEqual(os.environ["TRITON_CACHE_DIR"], got)
        self.assertEqual(os.stat(got).st_mode & 0o777, 0o700)

    def test_process_choice_kept(self):
        os.environ["TRITON_CACHE_DIR"] = "/somewhere/else"
        self.assertEqual(compiled.use_triton_cache(os.path.join(self.tmp, "c")), "/somewhere/else")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "c")))

    def test_group_writable_cache_refused(self):
        cache = os.path.join(self.tmp, "shared")
        os.mkdir(cache)
        os.chmod(cache, 0o2770)
        self.assertIsNone(compiled.use_triton_cache(cache))
        self.assertNotIn("TRITON_CACHE_DIR", os.environ)

    def test_symlinked_dir_refused(self):
        cache = os.path.join(self.tmp, "cache")
        os.mkdir(cache, 0o700)
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.mkdir(elsewhere, 0o700)
        os.symlink(elsewhere, os.path.join(cache, compiled.TRITON_DIR))
        self.assertIsNone(compiled.use_triton_cache(cache))
        self.assertNotIn("TRITON_CACHE_DIR", os.environ)


def _graph_break_models():
    """Models with a graph break and nothing warm_start can bind, built
    when torch is there."""
    import torch
    from torch import nn

    class Branch(nn.Module):
        """A data-dependent branch in a module with no submodules."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))

        def forward(self, x):
            y = x * self.w
            if y.sum() > 0:
                y = -y
            return y

    class Counts(nn.Module):
        """Changes an attribute of itself: Dynamo replays it after the graph."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.w

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Branch()

        def forward(self, x):
            return self.inner(x) + 1
    return Branch, Counts, Outer


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class GraphBreaks(unittest.TestCase):
    """What warm_start says of a graph break it cannot serve (the breaks
    are met by Dynamo under fullgraph before anything compiles or runs)."""

    def setUp(self):
        import torch
        self.torch = torch
        self.tmp = tempfile.mkdtemp(prefix="magi-breaks-")
        self.Branch, self.Counts, self.Outer = _graph_break_models()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _fails(self, model, **kw):
        fwd = magi_aot.warm_start(model, self.tmp, type(model).__name__, **kw)
        with self.assertRaises(MagiError) as cm:
            fwd(self.torch.ones(4))
        return cm.exception

    def test_nothing_to_bind_names_the_break_and_the_fix(self):
        e = self._fails(self.Branch())
        self.assertEqual(e.status, "MAGI_ERR_UNSUPPORTED")
        with open(__file__) as f:
            line = [ln.strip() for ln in f].index("if y.sum() > 0:") + 1
        self.assertIn("model 'Branch' cannot be served: it has a graph break at %s:%d "
                      "(`if y.sum() > 0:`): Data-dependent branching" % (__file__, line),
                      e.message)
        self.assertIn("no submodule it calls traces as one graph", e.message)
        self.assertIn("torch.cond", e.message)

    def test_side_effect_on_the_module_is_a_break(self):
        m = self.Counts()
        e = self._fails(m)
        self.assertIn("changes L['self'].calls, which Dynamo replays in Python after the graph",
                      e.message)
        self.assertEqual(m.calls, 1)   # the call ran once, as Python

    def test_submodules_false_refuses_naming_the_break(self):
        e = self._fails(self.Outer(), submodules=False)
        self.assertIn("model 'Outer' has a graph break at %s:" % __file__, e.message)
        self.assertIn("submodules=False) serves only a model that traces as one graph",
                      e.message)

    def test_patterns_that_match_nothing(self):
        with self.assertRaises(MagiError) as cm:
            magi_aot.warm_start(self.Outer(), self.tmp, "outer", submodules=["nope.*"])
        self.assertIn("submodules=['nope.*'] match no submodule", cm.exception.message)


class WarmStartProcesses(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.torch = torch
        cls.tmp = tempfile.mkdtemp(prefix="magi-warm-")
        cls.model_py = os.path.join(cls.tmp, "tiny_transformer.py")
        shutil.copy(MODEL_SRC, cls.model_py)
        cls.mod = cls._import(cls.model_py)
        torch.manual_seed(0)
        cls.state = os.path.join(cls.tmp, "state.pt")
        torch.save(cls.mod.Model(cls.mod.CONFIG).state_dict(), cls.state)
        cls.cache = os.path.join(cls.tmp, "cache")
        run = lambda name, *extra: _run_child(cls.cache, cls.model_py, cls.state,  # noqa: E731
                                              os.path.join(cls.tmp, name + ".json"), *extra)
        # a baseline with a cache of its own, then processes sharing one
        cls.base = _run_child(os.path.join(cls.tmp, "base-cache"), cls.model_py, cls.state,
                              os.path.join(cls.tmp, "base.json"))
        cls.a = run("a")
        cls.b = run("b")
        cls.d = run("d", "--simulate", "torch=0.0-simulated")
        with open(cls.model_py, "a") as f:
            f.write("\n# edited after the cache was filled\n")
        cls.c = run("c")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def _import(path):
        import importlib.util
        spec = importlib.util.spec_from_file_location("tiny_transformer_t", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def outs(self, name):
        return self.torch.load(os.path.join(self.tmp, name + ".json.pt"))

    def test_first_process_traces_and_stores(self):
        self.assertEqual(self.a["report"]["served"], "traced")
        self.assertIn("no region stored", self.a["report"]["reason"])
        self.assertGreaterEqual(self.a["counts"]["inductor_codegen"], 1)
        self.assertLess(self.a["max_abs_vs_eager"], 1e-4)

    def test_second_process_compiles_nothing(self):
        b = self.b
        self.assertEqual(b["report"]["served"], "stored", b["report"])
        self.assertIsNone(b["report"]["reason"])
        self.assertEqual(b["dynamo_unique_graphs"], 0)
        self.assertEqual(b["counts"], {"inductor_codegen": 0, "cpp_builds": 0})
        for x, y in zip(self.outs("a"), self.outs("b")):
            self.assertTrue(self.torch.equal(x, y))
        # the process that compiled on its own gets the same outputs
        self.assertEqual(self.base["report"]["served"], "traced")
        for x, y in zip(self.outs("base"), self.outs("b")):
            self.assertTrue(self.torch.equal(x, y))
        self.assertLess(b["max_abs_vs_eager"], 1e-4)

    def test_second_process_does_each_step_once(self):
        """Serving stored code, the warm start does each step once
        (warm_counts.install_steps wraps them in the child): the cache
        entry goes to the C loader once, which opens it once and hashes
        every section once, and hands over the stored code from that same
        read (nothing opens, verifies or decompresses the artifact again);
        the payload is chosen once, each of its blobs hashed once, each
        traced source file read and hashed once, the environment key
        computed once."""
        s = self.b["steps"]
        self.assertEqual(self.b["report"]["served"], "stored", self.b["report"])
        calls = s["c_calls"]
        self.assertEqual(calls["magi_loader_load_buffers"], 1, calls)
        self.assertGreaterEqual(calls["magi_loader_read_section"], 1, calls)
        self.assertEqual({k: v for k, v in calls.items()
                          if k not in ("magi_loader_load_buffers", "magi_loader_read_section")},
                         {"magi_loader_load": 0, "magi_artifact_open": 0, "magi_artifact_load_region": 0,
                          "magi_artifact_read_section": 0})
        # meta, strings, symbols, graph and each compiled section: hashed once, decoded once
        n = 4 + calls["magi_loader_read_section"]
        self.assertEqual(s["loader"], {"sections_hashed": n, "sections_decoded": n})
        self.assertEqual(s["choose"], 1)
        self.assertEqual(s["environment_key"], 1)
        self.assertTrue(s["blobs"])
        self.assertEqual(s["blobs"], {name: 1 for name in s["blobs"]})
        self.assertIn(self.model_py, s["traced_files"])
        self.assertEqual(s["traced_files"], {p: 1 for p in s["traced_files"]})
        self.assertEqual(s["read"], {p: 1 for p in s["traced_files"]})
        self.assertEqual(s["hashed_total"], len(s["blobs"]) + len(s["traced_files"]))

    def test_edited_source_recompiles_and_says_why(self):
        c = self.c
        self.assertEqual(c["report"]["served"], "traced")
        self.assertIn("source changed", c["report"]["reason"])
        self.assertIn(self.model_py, c["report"]["reason"])
        self.assertGreaterEqual(c["counts"]["inductor_codegen"], 1)
        self.assertLess(c["max_abs_vs_eager"], 1e-4)

    def test_changed_key_compiles_from_graph_and_says_why(self):
        d = self.d
        self.assertEqual(d["report"]["served"], "compiled")
        self.assertIn("key 'torch' differs", d["report"]["reason"])
        self.assertEqual(d["dynamo_unique_graphs"], 0)   # from the stored graph, no trace
        self.assertGreaterEqual(d["counts"]["inductor_codegen"], 1)
        for x, y in zip(self.outs("a"), self.outs("d")):
            self.assertTrue(self.torch.allclose(x, y, atol=1e-5))

    def test_inspect_lists_compiled_section(self):
        from magi_aot.cache import cache_get_bytes, read_index
        idx = read_index(self.cache, "tiny")
        self.assertEqual(len(idx["regions"]), 1)
        data = cache_get_bytes(self.cache, idx["regions"][0]["key"])
        path = os.path.join(self.tmp, "entry.magi")
        with open(path, "wb") as f:
            f.write(data)
        cli = os.environ.get("MAGI_CLI")
        if not cli:
            self.skipTest("MAGI_CLI not set (CTest sets it)")
        out = subprocess.run([cli, "inspect", path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("compiled", out.stdout)
        self.assertEqual(subprocess.run([cli, "verify", path]).returncode, 0)

    def _bind(self, mutate):
        torch = self.torch
        m = self._import(self.model_py).Model(self.mod.CONFIG)
        m.load_state_dict(torch.load(self.state))
        m.to(os.environ.get("MAGI_WARM_DEVICE", "cpu"))  # where the children ran it
        mutate(m)
        # at the default the model would be traced and stored beside
        # (MissCompiles); on_miss="raise" refuses at bind, naming the parameter
        with self.assertRaises(MagiError) as cm:
            magi_aot.warm_start(m, self.cache, "tiny", on_miss="raise")
        self.assertIn("another model_tag", cm.exception.message)
        return cm.exception.message

    def test_bind_errors_name_the_parameter(self):
        torch = self.torch
        # the edited source (test C) stored a fresh region: bind to it
        msg = self._bind(lambda m: delattr(m.proj, "weight"))
        self.assertIn("_modules['proj']._parameters['weight']", msg)
        msg = self._bind(lambda m: setattr(m.proj, "weight", torch.nn.Parameter(
            torch.zeros(5, 5, device=m.proj.weight.device))))
        self.assertIn("_modules['proj']._parameters['weight']: shape [5, 5]", msg)
        msg = self._bind(lambda m: m.head.to(torch.float64))
        self.assertIn("_modules['head']", msg)
        self.assertIn("float64", msg)

    def test_regions_stored_outside_warm_start_are_traced_again(self):
        from magi_aot.cache import _Cache, index_key
        cache = os.path.join(self.tmp, "cache-two")
        doc = {"model_tag": "two", "regions": [{"model_idx": 0, "key": "a", "sources": []},
                                               {"model_idx": 1, "key": "b", "sources": []}]}
        with _Cache(cache) as c:
            c.put(index_key("two"), json.dumps(doc).encode())
        m = self.mod.Model(self.mod.CONFIG)
        fwd = magi_aot.warm_start(m, cache, "two")
        self.assertIsNone(fwd.fn)
        self.assertIn("lists 2 regions (graph breaks) from a trace outside warm_start",
                      fwd.report["reason"])

if __name__ == "__main__":
    unittest.main()
