"""Packaging: `pip install ./python` needs no wheel, setuptools or network,
and every torch-only entry point says it needs PyTorch when torch is absent."""
import os
import subprocess
import sys
import tempfile
import unittest

from _util import ROOT, fixture

# Run with torch made unimportable, as on a machine without it.
NO_TORCH = r"""
import sys
sys.modules["torch"] = None
sys.path.insert(0, sys.argv[1])
import magi_aot
from magi_aot import fake, rebuild
region = magi_aot.load(sys.argv[2])
calls = {
    "fake_inputs": lambda: region.fake_inputs(),
    "graph_module": lambda: rebuild.graph_module(region),
    "run_fake": lambda: rebuild.run_fake(region),
    "resolve_target": lambda: rebuild.resolve_target("torch.ops.aten.mm.default"),
    "graph_to_doc": lambda: magi_aot.graph_to_doc(None),
    "save_backend": lambda: magi_aot.save_backend("/nonexistent", "tag"),
}
for name, call in calls.items():
    try:
        call()
    except magi_aot.TorchRequiredError as e:
        assert isinstance(e, ImportError)
        print(name, "->", e)
    else:
        print(name, "-> no error")
"""


class TorchRequired(unittest.TestCase):
    def test_torch_only_calls_say_they_need_pytorch(self):
        r = subprocess.run([sys.executable, "-c", NO_TORCH, os.path.join(ROOT, "python"), fixture("block")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 6, r.stdout)
        for line in lines:
            self.assertIn("needs PyTorch >= 2.", line)
            self.assertIn("not installed", line)
        self.assertNotIn("ModuleNotFoundError", r.stderr)


class PipInstall(unittest.TestCase):
    def test_pip_install_offline_without_wheel(self):
        with tempfile.TemporaryDirectory() as tmp:
            env_dir = os.path.join(tmp, "venv")
            r = subprocess.run([sys.executable, "-m", "venv", env_dir], capture_output=True, text=True)
            if r.returncode != 0:
                self.skipTest("cannot create a virtual environment here: " + r.stderr.strip()[-200:])
            py = os.path.join(env_dir, "bin", "python")
            has_wheel = subprocess.run([py, "-c", "import wheel"], capture_output=True).returncode == 0
            self.assertFalse(has_wheel, "a fresh virtual environment should not have wheel")
            # --no-index: nothing may be downloaded, not even build requirements.
            r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                                os.path.join(ROOT, "python")], capture_output=True, text=True, timeout=300,
                               cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            code = ("import magi_aot, os; "
                    "assert magi_aot.__file__.startswith(os.path.realpath(%r)), magi_aot.__file__; "
                    "print(magi_aot.fingerprint(%r))" % (env_dir, fixture("block")))
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed copy, not the tree
            r = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp, timeout=120,
                               env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(r.stdout.strip()), 64, r.stdout)


if __name__ == "__main__":
    unittest.main()
