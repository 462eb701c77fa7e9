#!/usr/bin/env bash
# `pip install ./python` in a fresh virtual environment (no system site
# packages, no MAGI_AOT_LIB, no PYTHONPATH) compiles libmagi_aot and the
# _docbuild extension and bundles them in the package; the installed
# package then loads a fixture from outside python/, with the library and
# the extension found inside the package directory, and without PyTorch.
#   bash tests/pip_install_test.sh SRC [PYTHON]
# Build requirements (scikit-build-core; cmake and ninja where the system
# lacks them) come from the package index pip is configured with.
set -euo pipefail
src=$(cd "$1" && pwd) py=${2:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MAGI_AOT_LIB MAGI_AOT_DOCBUILD PYTHONPATH
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
"$py" -m venv "$tmp/venv"
vpy=$tmp/venv/bin/python
"$vpy" -c "import sys; assert sys.prefix != sys.base_prefix" || { echo "not a virtual environment"; exit 1; }
start=$(date +%s)
if ! (cd "$tmp" && "$vpy" -m pip install --disable-pip-version-check "$src/python") >"$tmp/pip.log" 2>&1; then
  tail -n 40 "$tmp/pip.log"; echo "pip install ./python failed"; exit 1
fi
echo "pip install ./python: $(( $(date +%s) - start )) s"
if "$vpy" -c "import torch" 2>/dev/null; then echo "installing the package pulled in torch"; exit 1; fi
# The command of the documentation, from the repository root (not python/,
# so the installed copy is the one imported).
out=$(cd "$src" && "$vpy" -c "import magi_aot; print(magi_aot.load('fixtures/real/block.json').nodes)")
case "$out" in "[{"*) ;; *) echo "unexpected output: ${out:0:200}"; exit 1 ;; esac
# From a directory outside the checkout: the library and the extension are
# the package's own, and the document comes by the extension's path.
(cd "$tmp" && "$vpy" - "$src/fixtures/real/block.json" "$tmp/venv") <<'PY'
import os, sys
import magi_aot
from magi_aot import _lib, docio
pkg = os.path.dirname(os.path.realpath(magi_aot.__file__))
assert pkg.startswith(os.path.realpath(sys.argv[2])), pkg
region = magi_aot.load(sys.argv[1])
lib = _lib.lib_path()
assert lib and os.path.dirname(os.path.realpath(lib)) == pkg, (lib, pkg)
assert docio.path_used() == "direct", (docio.path_used(), docio.extension_missing())
assert len(region.nodes) == 45, len(region.nodes)
import importlib, importlib.util
# The subpackages are installed with it; fx/ and compile/ import without
# torch, runtime/ (which registers the torch operators) is only found.
for sub in ("fx", "compile", "runtime"):
    spec = importlib.util.find_spec("magi_aot." + sub)
    where = os.path.dirname(os.path.realpath(spec.origin))
    assert where == os.path.join(pkg, sub), (sub, where)
    if sub != "runtime":
        importlib.import_module("magi_aot." + sub)
print("installed package: %d nodes, library %s, document path %s"
      % (len(region.nodes), os.path.relpath(lib, sys.argv[2]), docio.path_used()))
PY
