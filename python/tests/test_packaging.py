"""Packaging: the library bundled in the package directory is found without
MAGI_AOT_LIB, a missing one is an error that says what to do, and every
torch-only entry point says it needs PyTorch when torch is absent."""
import os
import shutil
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
from magi_aot.fx import fake, rebuild
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


# A copy of the package in a directory outside the checkout, with a library
# in its package directory as a wheel bundles it: found without MAGI_AOT_LIB.
BUNDLED = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import magi_aot
from magi_aot import _lib
print(_lib.lib_path())
print(len(magi_aot.load(sys.argv[2]).nodes))
"""

MISSING = r"""
import sys
sys.path.insert(0, sys.argv[1])
import magi_aot
try:
    magi_aot.library_version()
except OSError as e:
    print(e)
"""


def _copy_package(dest):
    """The package's Python sources (subpackages included) under dest."""
    src = os.path.join(ROOT, "python", "magi_aot")
    pkg = os.path.join(dest, "magi_aot")
    for d, dirs, files in os.walk(src):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out = os.path.join(pkg, os.path.relpath(d, src))
        os.makedirs(out, exist_ok=True)
        for f in files:
            if f.endswith(".py"):
                shutil.copy(os.path.join(d, f), out)
    return pkg


class LibraryInPackage(unittest.TestCase):
    """The lookup order of magi_aot/_lib.py (docs/PYTHON.md, "Finding the
    library"); tests/pip_install_test.sh checks a real `pip install ./python`."""

    def _run(self, code, top, env_lib=None):
        env = {k: v for k, v in os.environ.items() if k not in ("MAGI_AOT_LIB", "PYTHONPATH")}
        if env_lib:
            env["MAGI_AOT_LIB"] = env_lib
        return subprocess.run([sys.executable, "-c", code, top, fixture("block")], capture_output=True,
                              text=True, timeout=120, env=env, cwd=top)

    def test_package_directory_first_without_env(self):
        built = os.environ.get("MAGI_AOT_LIB")
        if not built:
            self.skipTest("MAGI_AOT_LIB names no built library (run through ctest)")
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "site")  # no build*/ beside it
            pkg = _copy_package(top)
            shutil.copy(built, os.path.join(pkg, "libmagi_aot.so"))
            r = self._run(BUNDLED, top)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, nodes = r.stdout.split()
            self.assertEqual(path, os.path.join(pkg, "libmagi_aot.so"))
            self.assertEqual(nodes, "45")
            # MAGI_AOT_LIB still overrides the bundled copy.
            r = self._run(BUNDLED, top, env_lib=built)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split()[0], built)

    def test_installed_copy_serves_the_checkout_package(self):
        # The checkout's package first on sys.path (no library beside it, no
        # build tree), an installed copy with its bundled library after it.
        built = os.environ.get("MAGI_AOT_LIB")
        if not built:
            self.skipTest("MAGI_AOT_LIB names no built library (run through ctest)")
        with tempfile.TemporaryDirectory() as tmp:
            first = os.path.join(tmp, "checkout", "python")
            _copy_package(first)
            installed = _copy_package(os.path.join(tmp, "site-packages"))
            shutil.copy(built, os.path.join(installed, "libmagi_aot.so"))
            code = ("import sys; sys.path[:0] = [sys.argv[1], %r]\n" % os.path.dirname(installed)
                    + BUNDLED.replace("sys.path.insert(0, sys.argv[1])", ""))
            r = self._run(code, first)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, nodes = r.stdout.split()
            self.assertEqual(path, os.path.join(installed, "libmagi_aot.so"))
            self.assertEqual(nodes, "45")

    def test_missing_library_says_what_to_do(self):
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, "site")
            pkg = _copy_package(top)
            r = self._run(MISSING, top)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("libmagi_aot not found", r.stdout)
            self.assertIn("pip install ./python", r.stdout)
            self.assertIn("cmake --build build --target magi_aot", r.stdout)
            self.assertIn("MAGI_AOT_LIB", r.stdout)
            self.assertIn(pkg, r.stdout)  # where it looked


if __name__ == "__main__":
    unittest.main()
