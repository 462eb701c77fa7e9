#!/usr/bin/env bash
# The type check of the Python package: create (or reuse) a virtual
# environment holding the pinned mypy of python/requirements-typecheck.txt,
# then run python/tests/typecheck_ci.py in it (mypy over magi_aot with the
# configuration of python/pyproject.toml, and the checks that show it
# fails where it must). No torch needed: the check reads PyTorch as Any.
#   bash scripts/typecheck.sh [VENV_DIR] [PYTHON]
# VENV_DIR defaults to build/typecheck-venv; PYTHON (default python3)
# makes it. Reuses VENV_DIR when it already holds exactly those versions.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=${1:-build/typecheck-venv}
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
py=${2:-${PYTHON:-python3}}
req=python/requirements-typecheck.txt
stamp="$dir/.magi-requirements"
if [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  echo "typecheck: reusing $dir" >&2
else
  echo "typecheck: creating $dir from $req" >&2
  rm -rf "$dir"
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$req" 2>&1 \
    | { grep -v "^WARNING: Location" || true; } >&2
  cp "$req" "$stamp"
fi
"$dir/bin/python" -m mypy --version >&2
cd "$root/python/tests"
exec "$dir/bin/python" -m unittest -v typecheck_ci
