"""SymmRuntime.compile (magi_aot/runtime/compiled.py) on CPU, as CI runs it:
fresh process sets of 4 rank threads each (runtime_code_ranks.py, host
backend) share one cache directory.

  - the first set compiles the scheduled region once and stores it (the
    other ranks of that process load what it stored); a user's own
    compile_fx of the same graph launches the gathers in the same order;
  - a second, fresh process serves every rank from the stored code: no
    Inductor lowering runs, the outputs equal the first set's bit for bit,
    and the stored module's launch order (code_overlap: the kernels queued
    under each gather) is the fresh compile's;
  - a schedule option that leaves the launch order as it was shares the
    code; one that changes it (a looser in-flight bound, schedule=False)
    gives another key and compiles;
  - an entry others can write (group-writable mode, another owner) is not
    loaded: the region is compiled, the reason names the entry and why,
    and the entry is replaced by this user's own;
  - a trusted entry with a malformed payload or another key in its header
    does not serve, and the reason says which.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

from _util import HERE, ROOT, TORCH_REASON, torch_available

HAVE_TORCH = torch_available()
WORLD = 4


@unittest.skipUnless(HAVE_TORCH, TORCH_REASON)
class StoredRegionCode(unittest.TestCase):

    def _set(self, name, *extra):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                   TORCHINDUCTOR_COMPILE_THREADS="1",
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(self.d, "inductor-" + name))
        env.pop("MAGI_AOT_TRUST_COMPILED", None)
        proc = subprocess.run([sys.executable, os.path.join(HERE, "runtime_code_ranks.py"),
                               "--dir", self.d, "--cache", self.cache, "--out", name] + list(extra),
                              capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr[-3000:])
        with open(os.path.join(self.d, name + ".json")) as f:
            res = json.load(f)
        ranks = {int(r): v for r, v in res["ranks"].items()}
        self.assertEqual(sorted(ranks), list(range(WORLD)))
        return ranks, res

    def _entry(self, key):
        return os.path.join(self.cache, "v1", "entries", key)

    def _compiled_once(self, ranks, why):
        """Rank 0 compiled (Inductor lowered the graph) and stored; the
        other ranks of the process loaded that entry."""
        first = ranks[0]
        self.assertEqual(first["served"], "compiled", first)
        self.assertIn(why, first["reason"])
        self.assertGreaterEqual(first["lowerings"], 1)
        self.assertTrue(first["published"], first)
        for r in range(1, WORLD):
            self.assertEqual((ranks[r]["served"], ranks[r]["lowerings"], ranks[r]["key"]),
                             ("stored", 0, first["key"]), ranks[r])

    def test_compiled_once_then_served_from_the_store(self):
        import torch
        with tempfile.TemporaryDirectory() as d:
            self.d, self.cache = d, os.path.join(d, "cache")
            # 1. the first process compiles and stores
            first, res = self._set("first", "--read-order")
            self._compiled_once(first, "no compiled code stored under")
            key = first[0]["key"]
            st = os.stat(self.cache)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)   # made private
            counts = [o["kernels"] for o in first[0]["overlap"]]
            fresh = [o["kernels"] for o in res["fresh_overlap"]]
            self.assertEqual(counts, fresh)                     # the user's compile_fx's order
            self.assertEqual(len(counts), 3)
            self.assertEqual(counts[0], 0)
            self.assertTrue(all(counts[1:]), counts)            # compute under the later gathers
            for r in range(WORLD):
                self.assertEqual(first[r]["schedule_mode"], "identical")
                self.assertTrue(first[r]["close_to_eager"], first[r])

            # 2. a fresh process: every rank served from the store, no Inductor
            warm, _ = self._set("warm")
            before = torch.load(os.path.join(d, "first.pt"))
            after = torch.load(os.path.join(d, "warm.pt"))
            for r in range(WORLD):
                with self.subTest(rank=r):
                    w = warm[r]
                    self.assertEqual((w["served"], w["reason"], w["lowerings"], w["key"]),
                                     ("stored", None, 0, key), w)
                    self.assertEqual(w["code_path"], "direct")
                    self.assertIsNone(w["compile_s"])
                    self.assertEqual([o["kernels"] for o in w["overlap"]], fresh)
                    self.assertEqual(w["order"], first[r]["order"])
                    self.assertEqual(len(after[r]), len(before[r]))
                    for a, b in zip(after[r], before[r]):
                        self.assertTrue(torch.equal(a, b), "rank %d: output differs" % r)

            # 3. a schedule option that leaves the order as it was (the
            # default bound given in bytes) shares the code; one that moves
            # a launch (a looser bound) is another key and compiles
            bound = first[0]["max_inflight_bytes"]
            same, _ = self._set("same_order", "--max-inflight", str(bound))
            for r in range(WORLD):
                self.assertEqual((same[r]["served"], same[r]["lowerings"], same[r]["key"]),
                                 ("stored", 0, key), same[r])
                self.assertEqual(same[r]["order"], first[r]["order"])
            looser, _ = self._set("looser", "--max-inflight", str(bound + bound // 3))
            self._compiled_once(looser, "no compiled code stored under")
            self.assertNotEqual(looser[0]["order"], first[0]["order"])
            self.assertNotEqual(looser[0]["key"], key)

            # 4. another schedule (the graph as loaded): another key, compiled
            off, _ = self._set("off", "--schedule", "off")
            self._compiled_once(off, "no compiled code stored under")
            self.assertNotEqual(off[0]["key"], key)
            self.assertNotEqual(off[0]["order"], first[0]["order"])
            self.assertEqual(off[0]["schedule_mode"], "off")
            after = torch.load(os.path.join(d, "off.pt"))
            for r in range(WORLD):
                for a, b in zip(after[r], before[r]):
                    self.assertTrue(torch.allclose(a, b, rtol=1e-4, atol=1e-4))

            # 5. an entry its group can write: not loaded, compiled, replaced
            path = self._entry(key)
            os.chmod(path, 0o664)
            hostile, _ = self._set("group_writable")
            self._compiled_once(hostile, "stored code not loaded")
            self.assertIn("cache entry: %s: mode 0664 lets its group write it" % path,
                          hostile[0]["reason"])
            self.assertIsNotNone(hostile[0]["untrusted"])
            self.assertFalse(os.stat(path).st_mode & (stat.S_IWGRP | stat.S_IWOTH))

            # 6. an entry another user owns: not loaded (needs root to make one)
            if os.geteuid() != 0:
                self.skipTest("making an entry another user owns needs root")
            path = self._entry(off[0]["key"])
            os.chown(path, 65534, 65534)
            foreign, _ = self._set("foreign", "--schedule", "off")
            self._compiled_once(foreign, "stored code not loaded")
            self.assertIn("cache entry: %s: owned by uid 65534, not by this user" % path,
                          foreign[0]["reason"])
            self.assertEqual(os.stat(path).st_uid, os.geteuid())


class EntriesThatDoNotServe(unittest.TestCase):
    """A trusted entry whose payload is malformed, or whose header holds
    another key, is not loaded: the reason names the entry and what is
    wrong (the region is then compiled and the entry replaced)."""

    def test_malformed_and_other_key(self):
        from magi_aot.compile.payload import pack
        from magi_aot.runtime.compiled import COMPILER, _stored
        key = {"order": "a" * 64, "fingerprint": "f" * 64, "format": 1}
        rep = {}
        self.assertIsNone(_stored(b"not a payload", "symmcode.x", key, rep, {}))
        self.assertIn("entry symmcode.x: compiled section: not a magi compiled-code payload",
                      rep["reason"])
        other = dict(key, order="b" * 64)
        data = pack({"key": other, "compiler": COMPILER}, [("direct.json", b"{}")])
        rep = {}
        self.assertIsNone(_stored(data, "symmcode.y", key, rep, {}))
        self.assertEqual(rep["reason"], "entry symmcode.y: key 'order' differs: stored %r, running %r"
                         % ("b" * 64, "a" * 64))
        data = pack({"key": key, "compiler": "another"}, [])
        rep = {}
        self.assertIsNone(_stored(data, "symmcode.z", key, rep, {}))
        self.assertIn("key 'compiler' differs", rep["reason"])


if __name__ == "__main__":
    unittest.main()
