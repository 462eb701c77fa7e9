"""The type check of the package: mypy (pinned in
python/requirements-typecheck.txt) over magi_aot with the configuration of
python/pyproject.toml ([tool.mypy]) passes, and the check means something:
a public function that loses its annotations fails it, a caller passing the
wrong type is refused, and the py.typed marker is what makes an installed
copy's annotations visible to a user's type checker.

Run by scripts/typecheck.sh (test_python_types), in the virtual environment
that holds the pinned mypy; no torch needed.
"""
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
PACKAGE = os.path.join(PYTHON_DIR, "magi_aot")

# Public functions whose annotations the negative check removes, one per
# module under disallow_untyped_defs: (file in the package, qualified name).
STRIPPED = (("region.py", "load"), ("cache.py", "read_index"), ("schedule.py", "schedule_region"),
            ("runtime/__init__.py", "SymmRuntime.bind"), ("__init__.py", "library_version"))

# A user's script: right calls type as the API says, wrong ones are refused.
USER = '''\
import magi_aot
from magi_aot.cache import read_index

region = magi_aot.load("block.json")
reveal_type(region)
reveal_type(region.placeholders)
reveal_type(read_index("cache", "tag"))
fwd = magi_aot.warm_start(object(), "cache", "tag")
reveal_type(fwd.report.digests())
magi_aot.load(42)
magi_aot.load_many(["a.json"], transport=1)
'''


def _mypy(args, cwd, env=None):
    """(exit status, output) of `python -m mypy ARGS` run in cwd."""
    r = subprocess.run([sys.executable, "-m", "mypy", "--show-absolute-path"] + args,
                       cwd=cwd, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    return r.returncode, r.stdout + r.stderr


def _copy_package(dst):
    """The package and its mypy configuration under dst (python/'s layout)."""
    shutil.copytree(PACKAGE, os.path.join(dst, "magi_aot"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "bin"))
    shutil.copy(os.path.join(PYTHON_DIR, "pyproject.toml"), dst)
    return os.path.join(dst, "magi_aot")


def _strip_annotations(path, qualname):
    """Rewrite the def of `qualname` in the file at path without any
    annotation (parameters and return); returns the line of the def."""
    with open(path) as f:
        text = f.read()
    tree = ast.parse(text)
    scope, node = tree.body, None
    for part in qualname.split("."):
        node = next(n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part)
        scope = node.body
    assert isinstance(node, ast.FunctionDef), qualname
    args = node.args
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    bare = ast.FunctionDef(name=node.name, args=args, body=[ast.Pass()], decorator_list=[], returns=None,
                           type_comment=None, type_params=[], lineno=node.lineno, col_offset=node.col_offset)
    head = ast.unparse(bare).splitlines()[0]
    lines = text.splitlines(True)
    first, last = node.lineno - 1, node.body[0].lineno - 1  # the def's lines, up to its docstring
    lines[first:last] = [" " * node.col_offset + head + "\n"]
    with open(path, "w") as f:
        f.write("".join(lines))
    return node.lineno


class TypeCheck(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # one mypy cache for the runs over the checkout's package with its
        # configuration: a later run reads what an earlier one checked
        cls._cache = tempfile.TemporaryDirectory()
        cls.cache = cls._cache.name

    @classmethod
    def tearDownClass(cls):
        cls._cache.cleanup()

    def test_package_passes(self):
        rc, out = _mypy(["--cache-dir", self.cache, "-p", "magi_aot"], PYTHON_DIR)
        self.assertEqual(rc, 0, out)
        # every module of the package was checked, none skipped (mypy also
        # counts a directory without __init__.py, csrc/, as a namespace)
        n_files = 0
        for d, dirs, files in os.walk(PACKAGE):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            n_files += sum(f.endswith(".py") for f in files) + ("__init__.py" not in files)
        self.assertIn("Success: no issues found in %d source files" % n_files, out)

    def test_public_function_without_annotations_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            pkg = _copy_package(tmp)
            where = {}
            for rel, name in STRIPPED:
                where[name] = (os.path.join(pkg, rel), _strip_annotations(os.path.join(pkg, rel), name))
            rc, out = _mypy(["--cache-dir", os.path.join(tmp, "cache"), "-p", "magi_aot"], tmp)
        self.assertEqual(rc, 1, out)
        errors = re.findall(r"^(.+?):(\d+): error: (.*)$", out, re.M)
        for name, (path, line) in where.items():
            self.assertTrue(any(e[:2] == (path, str(line)) and re.fullmatch(
                r"Function is missing a (return )?type annotation  \[no-untyped-def\]", e[2]) for e in errors),
                "%s lost its annotations unnoticed:\n%s" % (name, out))
        self.assertEqual(len(errors), len(STRIPPED), out)

    def test_wrong_calls_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "user.py"), "w") as f:
                f.write(USER)
            # the package's configuration (PyTorch read as Any), the package
            # found on MYPYPATH as a checkout's user would have it
            config = os.path.join(PYTHON_DIR, "pyproject.toml")
            rc, out = _mypy(["--config-file", config, "--cache-dir", self.cache, "user.py"], tmp,
                            env={"MYPYPATH": PYTHON_DIR})
        self.assertEqual(rc, 1, out)
        self.assertIn('Revealed type is "magi_aot.region.Region"', out)
        self.assertIn('Revealed type is "list[dict[str, Any]]"', out)
        self.assertIn('Revealed type is "dict[str, Any] | None"', out)
        self.assertIn('Revealed type is "dict[str, dict[str, Any]]"', out)
        self.assertRegex(out, r'user\.py:10: error: Argument 1 to "load" has incompatible type "int"')
        self.assertRegex(out, r'user\.py:11: error: Argument "transport" to "load_many" has incompatible type '
                              r'"int"')

    def test_installed_copy_is_typed_through_py_typed(self):
        # A user's environment with the package installed in site-packages
        # (no MYPYPATH): py.typed makes mypy read its annotations; without
        # the marker the same copy is an untyped library.
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(tmp, "env")],
                           check=True, timeout=120)
            vpy = os.path.join(tmp, "env", "bin", "python")
            site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            pkg = _copy_package(site)
            self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")), "magi_aot/py.typed is missing")
            with open(os.path.join(tmp, "user.py"), "w") as f:
                f.write("import magi_aot\nreveal_type(magi_aot.load('a.json'))\n")
            with open(os.path.join(tmp, "mypy.ini"), "w") as f:
                f.write("[mypy]\n")
            args = ["--config-file", "mypy.ini", "--python-executable", vpy, "--no-incremental", "user.py"]
            rc, out = _mypy(args, tmp)
            self.assertEqual(rc, 0, out)
            self.assertIn('Revealed type is "magi_aot.region.Region"', out)
            os.unlink(os.path.join(pkg, "py.typed"))
            rc, out = _mypy(args, tmp)
            self.assertEqual(rc, 1, out)
            self.assertIn("missing library stubs or py.typed marker", out)


if __name__ == "__main__":
    unittest.main()
