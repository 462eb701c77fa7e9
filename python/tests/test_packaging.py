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


PACKAGE = os.path.join(ROOT, "python", "magi_aot")
OLD_PATHS = ("rebuild.py", "targets.py", "ops.py", "backend.py")  # documented paths kept as aliases


def _tree():
    """The package's files as docs name them: magi_aot/REL (csrc/ as one)."""
    out = set()
    for d, dirs, files in os.walk(PACKAGE):
        rel = os.path.relpath(d, PACKAGE)
        if rel == "csrc":
            out.add("magi_aot/csrc/")
            dirs[:] = []
            continue
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith((".py", ".c")):
                out.add("magi_aot/" + os.path.normpath(os.path.join(rel, f)))
    return out


def _imports(path):
    """The package modules a file imports at module level (absolute names)."""
    import ast
    rel = os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, ".")
    parts = ["magi_aot"] + [p for p in rel.split(".") if p != "__init__"]
    pkg = parts if rel.endswith("__init__") or rel == "__init__" else parts[:-1]
    out = set()
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if mod.startswith("magi_aot"):
                out.add(mod)
                out.update(mod + "." + a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("magi_aot"))
    return out


def _modules():
    """{module name: file path} of every Python module of the package."""
    out = {}
    for f in _tree():
        if f.endswith(".py"):
            rel = f[len("magi_aot/"):-3].split("/")
            name = ".".join(["magi_aot"] + [p for p in rel if p != "__init__"])
            out[name] = os.path.join(PACKAGE, *f.split("/")[1:])
    return out


def _all_imports(name, path, modules):
    """[(module, line, in_function)] of every package module the file
    imports, at module level and inside functions (`from .x import y`
    names the module x.y where that is one, else x)."""
    import ast
    pkg = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    with open(path) as f:
        tree = ast.parse(f.read())
    out = []

    def visit(node, in_function):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.ImportFrom):
                base = pkg[:len(pkg) - ch.level + 1] if ch.level else []
                mod = ".".join(base + ([ch.module] if ch.module else []))
                for a in ch.names:
                    target = mod + "." + a.name if mod + "." + a.name in modules else mod
                    out.append((target, ch.lineno, in_function))
            elif isinstance(ch, ast.Import):
                out.extend((a.name, ch.lineno, in_function) for a in ch.names)
            visit(ch, in_function or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    visit(tree, False)
    return [(m, line, fn) for m, line, fn in out if m in modules and m != name]


# The layers of test_imports_follow_the_layers: what each subpackage may
# import at module level (the core, magi_aot/*.py, imports none of them).
SUBPACKAGES = ("magi_aot.fx", "magi_aot.compile", "magi_aot.runtime")
MAY_IMPORT = {"magi_aot.fx": ("magi_aot.fx",), "magi_aot.compile": ("magi_aot.fx", "magi_aot.compile"),
              "magi_aot.runtime": ("magi_aot.runtime",)}


def _layer(module):
    return next((s for s in SUBPACKAGES if module == s or module.startswith(s + ".")), None)


# Every import of a package module made inside a function, and why it
# cannot be at module level (test_function_level_imports_have_a_reason
# checks each reason; any other such import fails it):
#   "layers"  the importer's layer may not import the module's at module
#             level (a call into a layer above, or across: MAY_IMPORT)
#   "torch"   the module cannot be imported without torch and the importer
#             can (`import magi_aot` works where torch is not installed)
FUNCTION_IMPORTS = {
    ("magi_aot.compile.backend", "magi_aot.runtime.plan"): "layers",
    ("magi_aot.fx.rebuild", "magi_aot.runtime.ops"): "layers",
    ("magi_aot.profile", "magi_aot.fx.expr"): "layers",
    ("magi_aot.profile", "magi_aot.fx.rebuild"): "layers",
    ("magi_aot.region", "magi_aot.fx"): "layers",
    ("magi_aot.region", "magi_aot.fx.fake"): "layers",
    ("magi_aot.region", "magi_aot.fx.rebuild"): "layers",
    ("magi_aot.runtime.compiled", "magi_aot.compile.code"): "layers",
    ("magi_aot.runtime.compiled", "magi_aot.compile.keys"): "layers",
    ("magi_aot.runtime.compiled", "magi_aot.compile.launch_order"): "layers",
    ("magi_aot.runtime.compiled", "magi_aot.compile.payload"): "layers",
    ("magi_aot.runtime.compiled", "magi_aot.compile.trust"): "layers",
    ("magi_aot.runtime.ops", "magi_aot.compile.launch_order"): "layers",
}

# Which modules import where torch is not installed ({module: error or None}).
IMPORTS_WITHOUT_TORCH = r"""
import importlib, json, sys
sys.modules["torch"] = None
sys.path.insert(0, sys.argv[1])
out = {}
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
        out[name] = None
    except ImportError as e:
        out[name] = str(e)
print(json.dumps(out))
"""


class ModuleLayout(unittest.TestCase):
    """docs/PYTHON.md's "Module layout" and docs/ARCHITECTURE.md's Python
    table name the files of the tree, the subpackages import the core and
    nothing the other way, and the documented old paths still serve."""

    def _doc_files(self, doc, start, stop):
        with open(os.path.join(ROOT, "docs", doc)) as f:
            text = f.read()
        text = text[text.index(start):]
        end = text.find(stop, len(start))
        return text if end < 0 else text[:end]

    def test_python_md_lists_every_file(self):
        import re
        text = self._doc_files("PYTHON.md", "## Module layout", "\n## ")
        listed = set(re.findall(r"^\| `(magi_aot/[^`]+)` \|", text, re.M))
        self.assertEqual(listed, _tree())

    def test_architecture_md_names_every_module(self):
        import re
        text = self._doc_files("ARCHITECTURE.md", "**Python** (`python/magi_aot/`", "\n\n**")
        listed = set()
        for where, mods in re.findall(r"^\| `(magi_aot/[^`]*)`[^|]* \| ([^|]+) \|", text, re.M):
            base = where if where.endswith("/") else where + "/"
            listed.update(base + m for m in re.findall(r"`([^`]+)`", mods))
        want = {f for f in _tree() if f.endswith(".py") and not f.endswith("/__init__.py")} | \
            {"magi_aot/_docbuild.c", "magi_aot/runtime/__init__.py"}
        self.assertEqual(listed, want)

    def test_no_import_cycles(self):
        """No module of the package reaches itself through its imports,
        those made inside functions included."""
        modules = _modules()
        graph = {n: sorted({m for m, _, _ in _all_imports(n, p, modules)}) for n, p in modules.items()}
        state, cycles = {}, []

        def walk(n, stack):
            state[n] = "open"
            stack.append(n)
            for m in graph[n]:
                if state.get(m) == "open":
                    cycles.append(stack[stack.index(m):] + [m])
                elif m not in state:
                    walk(m, stack)
            stack.pop()
            state[n] = "done"
        for n in sorted(graph):
            if n not in state:
                walk(n, [])
        self.assertEqual(cycles, [], "import cycles: %s" % "; ".join(" -> ".join(c) for c in cycles))

    def test_function_level_imports_have_a_reason(self):
        modules = _modules()
        found = {}
        for n, p in sorted(modules.items()):
            for m, line, in_function in _all_imports(n, p, modules):
                if in_function:
                    found.setdefault((n, m), "%s:%d" % (os.path.relpath(p, ROOT), line))
        for pair, where in sorted(found.items()):
            self.assertTrue(pair in FUNCTION_IMPORTS, "%s imports %s inside a function with no reason "
                          "listed in FUNCTION_IMPORTS: import it at module level" % (where, pair[1]))
        self.assertEqual(sorted(set(FUNCTION_IMPORTS) - set(found)), [],
                         "FUNCTION_IMPORTS lists imports the package no longer makes")
        need = sorted({x for pair, why in FUNCTION_IMPORTS.items() if why == "torch" for x in pair})
        without = {}
        if need:
            r = subprocess.run([sys.executable, "-c", IMPORTS_WITHOUT_TORCH, os.path.join(ROOT, "python")] + need,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            without = __import__("json").loads(r.stdout)
        for (importer, module), why in sorted(FUNCTION_IMPORTS.items()):
            with self.subTest(importer=importer, module=module):
                if why == "layers":
                    self.assertNotIn(_layer(module), MAY_IMPORT.get(_layer(importer), ()) + (None,),
                                     "%s may import %s at module level" % (importer, module))
                    self.assertNotEqual(importer, "magi_aot", "the package facade imports any layer")
                elif why == "torch":
                    self.assertIsNone(without[importer], "%s needs torch itself" % importer)
                    self.assertIsNotNone(without[module], "%s imports without torch" % module)
                else:
                    self.fail("unknown reason %r" % why)

    def test_the_core_imports_without_torch(self):
        """`import magi_aot` and every module outside the runtime (whose
        operators are torch's) import where torch is not installed: torch is
        imported inside the functions that need it."""
        names = sorted(n for n in _modules() if _layer(n) != "magi_aot.runtime" and n != "magi_aot.ops")
        r = subprocess.run([sys.executable, "-c", IMPORTS_WITHOUT_TORCH, os.path.join(ROOT, "python")] + names,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        failed = {k: v for k, v in __import__("json").loads(r.stdout).items() if v is not None}
        self.assertEqual(failed, {})

    def test_imports_follow_the_layers(self):
        subs, may = SUBPACKAGES, MAY_IMPORT
        for f in sorted(_tree()):
            if not f.endswith(".py"):
                continue
            rel = f[len("magi_aot/"):]
            if rel in OLD_PATHS or rel == "__init__.py":
                continue
            layer = next((s for s in subs if ("magi_aot/" + rel).startswith(s.replace(".", "/") + "/")), None)
            for m in _imports(os.path.join(PACKAGE, rel)):
                hit = next((s for s in subs if m == s or m.startswith(s + ".")), None)
                if hit is not None:
                    self.assertIn(hit, may.get(layer, ()), "%s imports %s at module level" % (f, m))

    def test_documented_old_paths_serve(self):
        import importlib
        import magi_aot
        from magi_aot.fx import rebuild, targets
        self.assertIs(magi_aot.bind_model, magi_aot.warm_start)
        self.assertIs(importlib.import_module("magi_aot.rebuild"), rebuild)
        self.assertIs(importlib.import_module("magi_aot.targets"), targets)
        from magi_aot import backend, cache
        self.assertIs(backend.cache_get, cache.cache_get)
        self.assertIs(backend.read_index, cache.read_index)
        # documents name the to_local stand-in magi_aot.rebuild.to_local
        self.assertEqual(rebuild.TO_LOCAL, "magi_aot.rebuild.to_local")
        self.assertEqual(targets.name_of(rebuild.to_local), rebuild.TO_LOCAL)
        self.assertIs(targets.resolve_allowed(rebuild.TO_LOCAL), rebuild.to_local)
        try:
            import torch  # noqa: F401
        except ImportError:
            return
        from magi_aot.runtime import ops
        self.assertIs(importlib.import_module("magi_aot.ops"), ops)

class ExampleFsdpE2E(unittest.TestCase):
    """examples/fsdp_e2e.py: --help documents every option, and the verdict
    names the gathers that went to the copy engine and those kept on c10d."""

    def _module(self):
        import importlib.util
        path = os.path.join(ROOT, "examples", "fsdp_e2e.py")
        spec = importlib.util.spec_from_file_location("fsdp_e2e_under_test", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)   # imports no torch at module level
        return mod

    def test_help_documents_every_option(self):
        ap = self._module().parser()
        for action in ap._actions:
            with self.subTest(option=action.dest):
                self.assertTrue(action.help and len(action.help) > 15, action.dest)
        text = ap.format_help()
        for opt in ("--out", "--device", "--world", "--mode", "--inductor", "--bench",
                    "--bad-plan-rank", "--mismatch", "--timeout", "--launch-timeout", "--tag"):
            self.assertIn(opt, text)

    def test_verdict_names_the_copy_engine_gathers(self):
        line = self._module().transport_line([
            {"rank": 0, "ok": True, "copy_engine": ["wq0", "experts (coalesced)"],
             "kept": [["w_cast", "cast"], ["w_pad", "pad"]]},
            {"rank": 1, "ok": True}])
        self.assertEqual(line, "2 gathers on the copy engine (wq0, experts (coalesced)); "
                               "2 kept on c10d (w_cast: cast, w_pad: pad)")
        self.assertEqual(self._module().transport_line([{"rank": 0, "ok": False}]), "")


if __name__ == "__main__":
    unittest.main()
