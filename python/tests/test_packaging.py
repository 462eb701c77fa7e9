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
    nothing the other way, and each module has one import path."""

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
            if rel == "__init__.py":
                continue
            layer = next((s for s in subs if ("magi_aot/" + rel).startswith(s.replace(".", "/") + "/")), None)
            for m in _imports(os.path.join(PACKAGE, rel)):
                hit = next((s for s in subs if m == s or m.startswith(s + ".")), None)
                if hit is not None:
                    self.assertIn(hit, may.get(layer, ()), "%s imports %s at module level" % (f, m))

    def test_one_path_per_module(self):
        """No top-level module re-exports a subpackage's (one import path
        each) and warm_start has one name; documents name the to_local
        stand-in by its document target, which resolves both ways."""
        import importlib
        import magi_aot
        from magi_aot.fx import rebuild, targets
        self.assertFalse(hasattr(magi_aot, "bind_model"))
        for old in ("rebuild", "targets", "ops", "backend"):
            with self.assertRaises(ImportError, msg="magi_aot." + old):
                importlib.import_module("magi_aot." + old)
        self.assertEqual(rebuild.TO_LOCAL, "magi.to_local")
        self.assertEqual(targets.name_of(rebuild.to_local), rebuild.TO_LOCAL)
        self.assertIs(targets.resolve_allowed(rebuild.TO_LOCAL), rebuild.to_local)
        self.assertIs(targets.resolve(rebuild.TO_LOCAL), rebuild.to_local)
        with self.assertRaises(targets.TargetRefused):   # the old Python path is no target
            targets.resolve_allowed("magi_aot.rebuild.to_local")


class Configuration(unittest.TestCase):
    """magi_aot/config.py holds every environment variable the package
    reads: nothing else in the package reads the environment, the C sources
    read none, and docs/PYTHON.md's table is the module's."""

    def test_only_config_reads_the_environment(self):
        import re
        pat = re.compile(r"\bos\.environ\b|\bgetenv\b|\benviron\s*\[|from\s+os\s+import\s+[^\n]*\benviron\b")
        found = []
        for f in sorted(_tree()):
            if not f.endswith(".py") or f == "magi_aot/config.py":
                continue
            with open(os.path.join(PACKAGE, f[len("magi_aot/"):])) as fh:
                for n, line in enumerate(fh, 1):
                    if pat.search(line.split("#", 1)[0]):
                        found.append("%s:%d: %s" % (f, n, line.strip()))
        self.assertEqual(found, [], "read the environment through magi_aot.config")

    def test_the_c_sources_read_no_environment(self):
        import glob
        import re
        pat = re.compile(r"\b(secure_)?getenv\s*\(|\benviron\b")
        files = [f for d in ("src", "tools") for f in glob.glob(os.path.join(ROOT, d, "**", "*.[ch]"),
                                                                recursive=True)]
        files += glob.glob(os.path.join(PACKAGE, "*.c")) + glob.glob(os.path.join(PACKAGE, "csrc", "*"))
        self.assertGreater(len(files), 50)
        found = [os.path.relpath(f, ROOT) for f in files if pat.search(open(f, errors="replace").read())]
        self.assertEqual(found, [], "the C library takes no setting from the environment (docs/PYTHON.md)")

    def test_every_variable_named_is_in_the_table(self):
        import re
        from magi_aot import config
        names = {s.name for s in config.SETTINGS}
        named = set()
        for f in sorted(_tree()):
            if f.endswith(".py"):
                with open(os.path.join(PACKAGE, f[len("magi_aot/"):])) as fh:
                    named.update(re.findall(r"\bMAGI_AOT_[A-Z_]+\b", fh.read()))
        for doc in ("README.md", os.path.join("docs", "PYTHON.md")):
            with open(os.path.join(ROOT, doc)) as fh:
                named.update(re.findall(r"\bMAGI_AOT_[A-Z_]+\b", fh.read()))
        self.assertEqual(named - names, set(), "named in the package or its docs, missing from magi_aot.config")

    def test_docs_table_is_the_modules(self):
        from magi_aot import config
        with open(os.path.join(ROOT, "docs", "PYTHON.md")) as f:
            text = f.read()
        marker = "<!-- configuration table: generated by magi_aot.config.doc_table() -->\n"
        self.assertIn(marker, text)
        at = text.index(marker) + len(marker)
        end = text.find("\n\n", at)
        self.assertEqual(text[at:end + 1], config.doc_table(),
                         "docs/PYTHON.md's Configuration table differs from magi_aot.config.doc_table()")

    def test_settings_parse_as_the_readers_did(self):
        from magi_aot import config
        self.assertEqual(len({s.name for s in config.SETTINGS}), len(config.SETTINGS))
        self.assertIs(config.by_name("MAGI_AOT_ON_MISS"), config.ON_MISS)
        with self.assertRaises(KeyError):
            config.by_name("MAGI_AOT_NO_SUCH")
        env = {}
        self.assertEqual([s.get(env) for s in config.SETTINGS], [s.default for s in config.SETTINGS])
        env = {"MAGI_AOT_OPS": " C++ ", "MAGI_AOT_ALLOW_TARGETS": " a.b , ,c.* ",
               "MAGI_AOT_TRUST_COMPILED": "yes", "MAGI_AOT_DIRECT": "0", "MAGI_AOT_ON_MISS": "",
               "MAGI_AOT_PROGRESS_S": "-3", "MAGI_AOT_LIB": "", "MAGI_AOT_HOST_ID": "h1"}
        self.assertEqual(config.OPS.get(env), "c++")
        self.assertEqual(config.ALLOW_TARGETS.get(env), ("a.b", "c.*"))
        self.assertIs(config.TRUST_COMPILED.get(env), False)      # only "1" trusts
        self.assertIs(config.TRUST_COMPILED.get({"MAGI_AOT_TRUST_COMPILED": "1"}), True)
        self.assertIs(config.DIRECT.get(env), False)
        self.assertEqual(config.ON_MISS.get(env), "compile")        # empty: the default
        self.assertEqual(config.PROGRESS_S.get(env), 0.0)
        self.assertEqual(config.PROGRESS_S.get({"MAGI_AOT_PROGRESS_S": "soon"}), 30.0)
        self.assertIsNone(config.LIB.get(env))
        self.assertEqual(config.LIB.raw(env), "")
        from magi_aot.runtime.hosts import host_id
        self.assertEqual(host_id(env), "env:h1")
        self.assertEqual(host_id({"LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "3"}), "node:3")
        self.assertTrue(host_id({"GROUP_RANK": "3"}).startswith("name:"))


def _slug(heading):
    """The anchor a Markdown renderer (GitHub's rule) gives a heading."""
    import re
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(path):
    """(title, anchor) of every heading of a Markdown file, outside code blocks."""
    out, seen, fenced = [], {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and line.startswith("#"):
                title = line.lstrip("#").strip()
                a = _slug(title)
                n = seen.get(a, 0)
                seen[a] = n + 1
                out.append((title, a if n == 0 else "%s-%d" % (a, n)))
    return out


def _text_files():
    """The tree's sources and documents (build folders and virtual environments left out)."""
    exts = (".md", ".c", ".h", ".cpp", ".py", ".sh", ".cmake", ".txt")
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d not in ("node_modules",)]
        for name in files:
            if name.endswith(exts):
                yield os.path.join(top, name)


class DocLinks(unittest.TestCase):
    """Links between the documents resolve: a Markdown link to a file or a
    heading of docs/ or README.md, and every mention of a section of
    docs/PERFORMANCE.md (or its history) in the tree, by anchor, by quoted
    heading or by run letter."""

    PERF = ("PERFORMANCE.md", "PERFORMANCE_HISTORY.md")

    def test_markdown_links_resolve(self):
        import re
        docs = [os.path.join(ROOT, "README.md")] + sorted(
            os.path.join(ROOT, "docs", n) for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
        bad = []
        for doc in docs:
            with open(doc, encoding="utf-8") as f:
                text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                if not os.path.exists(dest):
                    bad.append("%s: link to %s: no such file" % (os.path.relpath(doc, ROOT), target))
                elif anchor and dest.endswith(".md") and anchor not in {a for _, a in _headings(dest)}:
                    bad.append("%s: link to %s: no such heading" % (os.path.relpath(doc, ROOT), target))
        self.assertEqual(bad, [])

    def test_performance_references_resolve(self):
        import re
        heads = {n: _headings(os.path.join(ROOT, "docs", n)) for n in self.PERF}
        texts = {}
        for n in self.PERF:
            with open(os.path.join(ROOT, "docs", n), encoding="utf-8") as f:
                texts[n] = f.read()
        ref = re.compile(r"(PERFORMANCE(?:_HISTORY)?\.md)(?:#([\w-]+)|,? \(?\"([^\"]{1,120})\"|, [Rr]un ([A-Z])\b)")
        bad, seen = [], 0
        for path in _text_files():
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in ref.finditer(text):
                seen += 1
                doc, anchor, title, run = m.groups()
                where = "%s:%d" % (os.path.relpath(path, ROOT), text.count("\n", 0, m.start()) + 1)
                if anchor and anchor not in {a for _, a in heads[doc]}:
                    bad.append("%s: %s#%s: no such heading" % (where, doc, anchor))
                if title:
                    # a quoted heading may run over a comment's line break
                    title = " ".join(re.sub(r"\n\s*(?:#|\*|//)?", " ", title).split())
                    if not any(h.startswith(title) for h, _ in heads[doc]):
                        bad.append('%s: %s "%s": no heading starts so' % (where, doc, title))
                if run and not re.search(r"\b[Rr]un %s\b" % run, texts[doc]):
                    bad.append("%s: %s, run %s: the document names no such run" % (where, doc, run))
        self.assertEqual(bad, [])
        self.assertGreater(seen, 5, "the references to docs/PERFORMANCE.md were not found")

    def test_performance_contents_list_every_section(self):
        path = os.path.join(ROOT, "docs", "PERFORMANCE.md")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        contents = text[text.index("## Contents"):]
        contents = contents[:contents.index("\n## ", 1)]
        sections = [a for t, a in _headings(path) if ("## " + t) in text.split("\n") and t != "Contents"]
        self.assertEqual([a for a in sections if "(#%s)" % a not in contents], [])


class WhichCallTable(unittest.TestCase):
    """docs/PYTHON.md's "Which call do I want": every call it names exists
    under that name, takes the arguments the table writes (positional ones
    by their parameter's name, keywords by name), and every section it links
    to is a heading of the document."""

    def _rows(self):
        import re
        with open(os.path.join(ROOT, "docs", "PYTHON.md"), encoding="utf-8") as f:
            text = f.read()
        part = text[text.index("## Which call do I want"):]
        part = part[:part.index("\n## ", 1)]
        rows = [l for l in part.splitlines() if l.startswith("| ") and not l.startswith("| to ...")]
        self.assertGreater(len(rows), 10)
        return [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows], re

    def _resolve(self, dotted):
        import importlib
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for a in parts[i:]:
                obj = getattr(obj, a)
            return obj
        raise ImportError(dotted)

    def test_calls_exist_with_their_arguments(self):
        import inspect
        rows, re = self._rows()
        bad = []
        for task, calls, _ in rows:
            names = 0
            for span in re.findall(r"`([^`]+)`", calls):
                m = re.match(r"python -m ([\w.]+)", span)
                if m:
                    names += 1
                    self._resolve(m.group(1))
                    continue
                m = re.match(r"((?:magi_aot|Region)\.[\w.]+)\((.*)\)$", span)
                if not m:
                    continue
                names += 1
                dotted = m.group(1)
                obj = self._resolve("magi_aot." + dotted if dotted.startswith("Region.") else dotted)
                sig = inspect.signature(obj)
                params = [p for p in sig.parameters.values() if p.name != "self"]
                pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                args = [a.strip() for a in m.group(2).split(",") if a.strip()]
                for i, a in enumerate(args):
                    if "=" in a:
                        kw = a.split("=")[0].strip()
                        if kw not in sig.parameters and not any(p.kind == p.VAR_KEYWORD for p in params):
                            bad.append("%s: no keyword %s" % (span, kw))
                    elif i >= len(pos) or pos[i] != a:
                        bad.append("%s: argument %d is %s, the function's is %s"
                                   % (span, i + 1, a, pos[i] if i < len(pos) else "nothing"))
            if not names:
                bad.append("row %r names no call" % task)
        self.assertEqual(bad, [])

    def test_sections_are_headings(self):
        rows, re = self._rows()
        anchors = {a for _, a in _headings(os.path.join(ROOT, "docs", "PYTHON.md"))}
        for _, _, section in rows:
            link = re.match(r"\[[^\]]+\]\(#([\w-]+)\)$", section)
            self.assertTrue(link and link.group(1) in anchors, section)


# The public API whose every function and method carries annotations (the
# type check, python/tests/typecheck_ci.py, holds the modules named in
# python/pyproject.toml to the same rule; this covers the rest, such as
# the warm start). (module, names): a class is checked method by method,
# its __init__ too unless the class is only made by a function.
PUBLIC_API = (
    ("magi_aot", None),   # None: the module's __all__
    ("magi_aot.region", None), ("magi_aot.cache", None), ("magi_aot.schedule", None),
    ("magi_aot.profile", None), ("magi_aot.loaded", None), ("magi_aot.report", None),
    ("magi_aot._lib", ("MagiError", "MagiUnsupported", "lib_path", "has")),
    ("magi_aot.compile.warm", ("warm_start", "BoundForward")),
)
MADE_BY_A_FUNCTION = {"BoundForward": "warm_start"}


def _unannotated(fn):
    """The parameters (and "return") of fn that carry no annotation."""
    import inspect
    sig = inspect.signature(fn)
    out = [n for i, (n, p) in enumerate(sig.parameters.items())
           if p.annotation is inspect.Parameter.empty and not (i == 0 and n in ("self", "cls"))]
    if sig.return_annotation is inspect.Signature.empty:
        out.append("return")
    return out


def _api_functions(obj, name):
    """[(qualified name, function)] of a public function or class."""
    import inspect
    if not inspect.isclass(obj):
        return [(name, obj)] if callable(obj) else []
    out = []
    for attr, v in vars(obj).items():
        if attr == "__init__" and obj.__name__ in MADE_BY_A_FUNCTION:
            continue
        if attr.startswith("_") and attr not in ("__init__", "__call__", "__enter__", "__exit__"):
            continue
        if isinstance(v, property):
            v = v.fget
        elif isinstance(v, (classmethod, staticmethod)):
            v = v.__func__
        if inspect.isfunction(v):
            out.append(("%s.%s" % (name, attr), v))
    return out


class PublicApiAnnotated(unittest.TestCase):
    """Every function of the public API, and every public method of its
    classes, annotates each parameter and its return (docs/TESTS.md, "The
    type check")."""

    def _check(self, modname, names):
        import importlib
        mod = importlib.import_module(modname)
        checked = 0
        for name in names if names is not None else mod.__all__:
            for qual, fn in _api_functions(getattr(mod, name), "%s.%s" % (modname, name)):
                with self.subTest(function=qual):
                    self.assertEqual(_unannotated(fn), [], "%s lacks annotations" % qual)
                checked += 1
        return checked

    def test_public_functions_are_annotated(self):
        counts = {m: self._check(m, names) for m, names in PUBLIC_API}
        for m, n in counts.items():
            self.assertGreater(n, 0, "%s: nothing checked" % m)

    def test_runtime_is_annotated(self):
        from _util import torch_available
        if not torch_available():
            self.skipTest("magi_aot.runtime needs torch")
        self.assertGreater(self._check("magi_aot.runtime", ("SymmRuntime",)), 10)

    def test_a_function_without_annotations_is_found(self):
        def bare(self, x, *, y=0):
            return x

        def typed(self, x: int, *, y: int = 0) -> int:
            return x

        self.assertEqual(_unannotated(bare), ["x", "y", "return"])
        self.assertEqual(_unannotated(typed), [])

        class Made:
            def __init__(self, v):
                self.v = v

            @property
            def value(self):
                return self.v

            def _private(self):
                pass

        names = sorted(q for q, _ in _api_functions(Made, "Made"))
        self.assertEqual(names, ["Made.__init__", "Made.value"])


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
