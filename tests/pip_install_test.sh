#!/usr/bin/env bash
# `pip install './python[torch]'`, the README's command, in a fresh virtual
# environment (no system site packages, no MAGI_AOT_LIB, no PYTHONPATH)
# compiles libmagi_aot, the _docbuild extension, the torch operator
# extension _C and the magi-aot program and bundles them in the package:
# the operators are the C++ ones (ops.IMPLEMENTATION == "c++"), the
# `magi-aot` command is on the environment's PATH, and the installed
# package loads a fixture from outside python/, with the library and the
# extension found inside the package directory, and without PyTorch; it
# carries the py.typed marker of its annotations.
# A configure that is asked for the operators and cannot build them stops,
# naming why (no silent Python fallback).
#   bash tests/pip_install_test.sh SRC [PYTHON]
# The environment gets PYTHON's torch through a .pth file (an install of
# torch would take minutes): the build backend compiles against the torch of
# the environment being installed into; into one without torch it refuses. Build requirements (scikit-build-core; cmake and ninja where
# the system lacks them) come from the package index pip is configured
# with. Without torch in PYTHON the operators are left out explicitly
# (cmake.define.MAGI_TORCH_OPS=OFF), unless MAGI_REQUIRE_TORCH=1 (CI).
set -euo pipefail
src=$(cd "$1" && pwd) py=${2:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MAGI_AOT_LIB MAGI_AOT_DOCBUILD MAGI_AOT_TORCH_OPS_LIB MAGI_AOT_OPS MAGI_CLI PYTHONPATH
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

# Asked for the operators without a torch to build them against: the
# configure stops and says why and how to build without them.
if cmake -S "$src" -B "$tmp/noops" -DMAGI_TORCH_OPS=ON -DMAGI_TORCH_CMAKE_PREFIX="$tmp/no-torch" \
     -DMAGI_PYTHON_EXT=OFF -DMAGI_BUILD_TESTS=OFF -DMAGI_BUILD_BENCHMARKS=OFF -DMAGI_BUILD_FUZZ=OFF \
     >"$tmp/noops.log" 2>&1; then
  echo "MAGI_TORCH_OPS=ON without torch configured"; exit 1
fi
grep -q "torch operator extension cannot be built" "$tmp/noops.log" &&
  grep -q "MAGI_TORCH_OPS=OFF" "$tmp/noops.log" || { tail -n 20 "$tmp/noops.log"; echo "no reason given"; exit 1; }
rm -rf "$tmp/noops"

# Into an environment without torch: the backend stops before compiling,
# naming the way on (install torch first, or MAGI_TORCH_OPS=OFF), instead
# of building a package with the Python kernels or fetching a torch of
# its own (--no-deps: the extra's torch is not resolved for this).
"$py" -m venv "$tmp/bare"
if (cd "$tmp" && "$tmp/bare/bin/python" -m pip install --disable-pip-version-check --no-deps "$src/python[torch]") \
     >"$tmp/bare.log" 2>&1; then
  echo "pip install './python[torch]' into an environment without torch succeeded"; exit 1
fi
grep -q "imports no torch" "$tmp/bare.log" && grep -q "MAGI_TORCH_OPS=OFF" "$tmp/bare.log" ||
  { tail -n 30 "$tmp/bare.log"; echo "no reason given for the refused install"; exit 1; }
grep -q "Building C object" "$tmp/bare.log" && { echo "it compiled before refusing"; exit 1; }
rm -rf "$tmp/bare"

"$py" -m venv "$tmp/venv"
vpy=$tmp/venv/bin/python
"$vpy" -c "import sys; assert sys.prefix != sys.base_prefix" || { echo "not a virtual environment"; exit 1; }
site=$("$vpy" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
extra=() want_ops=c++
if torch_dir=$("$py" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))" 2>/dev/null); then
  echo "$torch_dir" >"$site/zz_test_torch.pth"
elif [ "${MAGI_REQUIRE_TORCH:-0}" = 1 ]; then
  echo "MAGI_REQUIRE_TORCH=1 but $py cannot import torch"; exit 1
else
  echo "note: $py has no torch; installing without the operator extension"
  extra=(--config-settings=cmake.define.MAGI_TORCH_OPS=OFF) want_ops=none
fi
start=$(date +%s)
if ! (cd "$tmp" && "$vpy" -m pip install --disable-pip-version-check "${extra[@]}" "$src/python[torch]") >"$tmp/pip.log" 2>&1; then
  tail -n 40 "$tmp/pip.log"; echo "pip install './python[torch]' failed"; exit 1
fi
echo "pip install './python[torch]': $(( $(date +%s) - start )) s"
if [ -e "$site/torch" ]; then echo "the install put a second torch into the environment"; exit 1; fi

# The magi-aot command: on the environment's PATH, the bundled program.
cli=$tmp/venv/bin/magi-aot
[ -x "$cli" ] || { echo "no magi-aot command in $tmp/venv/bin"; exit 1; }
help=$(cd "$tmp" && PATH="$tmp/venv/bin:$PATH" magi-aot --help)
grep -q "^usage: magi-aot" <<<"$help" || { echo "magi-aot --help: ${help:0:300}"; exit 1; }
(cd "$tmp" && PATH="$tmp/venv/bin:$PATH" magi-aot inspect "$src/fixtures/real/block.json") >"$tmp/inspect.out"
grep -q "nodes" "$tmp/inspect.out" || { head -n 5 "$tmp/inspect.out"; echo "magi-aot inspect printed no nodes"; exit 1; }
set +e; (cd "$tmp" && PATH="$tmp/venv/bin:$PATH" magi-aot no-such-command) 2>/dev/null; rc=$?; set -e
[ "$rc" = 2 ] || { echo "magi-aot no-such-command: exit $rc, expected the program's usage status 2"; exit 1; }

# The operators: the C++ kernels of the bundled extension.
if [ "$want_ops" = c++ ]; then
  got=$(cd "$tmp" && "$vpy" -c "
import os, magi_aot
from magi_aot.runtime import ops
pkg = os.path.dirname(os.path.realpath(magi_aot.__file__))
assert os.path.dirname(os.path.realpath(ops.EXTENSION_PATH or '')) == pkg, (ops.EXTENSION_PATH, pkg)
print(ops.IMPLEMENTATION, ops.FALLBACK_REASON)")
  [ "$got" = "c++ None" ] || { echo "ops.IMPLEMENTATION after pip install: $got"; exit 1; }
fi
# The command of the documentation, from the repository root (not python/,
# so the installed copy is the one imported).
out=$(cd "$src" && "$vpy" -c "import magi_aot; print(magi_aot.load('fixtures/real/block.json').nodes)")
case "$out" in "[{"*) ;; *) echo "unexpected output: ${out:0:200}"; exit 1 ;; esac
# From a directory outside the checkout: the library and the extension are
# the package's own, and the document comes by the extension's path.
(cd "$tmp" && "$vpy" - "$src/fixtures/real/block.json" "$tmp/venv") <<'PY'
import os, sys
sys.modules["torch"] = None  # the package loads without PyTorch
import magi_aot
from magi_aot import _lib, docio
pkg = os.path.dirname(os.path.realpath(magi_aot.__file__))
assert pkg.startswith(os.path.realpath(sys.argv[2])), pkg
region = magi_aot.load(sys.argv[1])
lib = _lib.lib_path()
assert lib and os.path.dirname(os.path.realpath(lib)) == pkg, (lib, pkg)
assert docio.path_used() == "direct", (docio.path_used(), docio.extension_missing())
# PEP 561: the package says it carries its own annotations
assert os.path.isfile(os.path.join(pkg, "py.typed")), "no py.typed in the installed package"
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
