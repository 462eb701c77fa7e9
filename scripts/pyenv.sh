#!/usr/bin/env bash
# Create (or reuse) the virtual environment the Python tests run in, with the
# pinned versions of python/requirements-ci.txt (PyTorch CPU build,
# transformers), and print its interpreter's path on the last line.
#   bash scripts/pyenv.sh [DIR]        (default: build-venv)
# Reuses DIR when it already holds exactly those versions.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${MAGI_VENV:-build-venv}}
req=python/requirements-ci.txt
titan=python/requirements-titan.txt  # installed with --no-deps (its header says why)
py=${PYTHON:-python3}
stamp="$dir/.magi-requirements"
if [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && cat "$req" "$titan" | cmp -s - "$stamp"; then
  echo "pyenv: reusing $dir" >&2
else
  echo "pyenv: creating $dir from $req" >&2
  rm -rf "$dir"
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$req" 2>&1 \
    | { grep -v "^WARNING: Location" || true; } >&2
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$titan" 2>&1 \
    | { grep -v "^WARNING: Location" || true; } >&2
  cat "$req" "$titan" > "$stamp"
fi
"$dir/bin/python" -c "import torch, transformers, torchtitan; print('pyenv: torch', torch.__version__, 'transformers', transformers.__version__, 'torchtitan', torchtitan.__version__)" >&2
echo "$(cd "$dir" && pwd)/bin/python"
