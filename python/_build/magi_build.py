"""The wheel's build backend: scikit-build-core, told which torch to build
the operator extension (magi_aot/_C, python/magi_aot/csrc) against.

An isolated `pip install ./python` runs the build in an environment that
holds only the build requirements, so the torch of the environment being
installed into is not importable there. This backend looks for it with the
same interpreter outside pip's isolation (`python -E`: pip isolates through
PYTHONPATH) and:

  - when that environment has torch, builds against exactly it (its CMake
    prefix goes to CMake as MAGI_TORCH_CMAKE_PREFIX; nothing is downloaded);
  - when it has none (a fresh environment getting torch from the `[torch]`
    extra in the same pip run), asks pip for `torch` as a build requirement,
    resolved by the same index and constraints as the extra's, and builds
    against that.

The extension is required (pyproject.toml sets MAGI_TORCH_OPS=ON): a build
that cannot find torch or compile the extension fails, saying so, instead
of installing a package whose operators fall back to Python. Building
without it is explicit: --config-settings=cmake.define.MAGI_TORCH_OPS=OFF.
"""
import subprocess
import sys

from scikit_build_core import build as _skb
from scikit_build_core.build import (  # noqa: F401 - the hooks this backend does not change
    build_sdist,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

_OPS_KEY = "cmake.define.MAGI_TORCH_OPS"
_PREFIX_KEY = "cmake.define.MAGI_TORCH_CMAKE_PREFIX"
_PROBE = "import torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path)"


def _ops_wanted(config_settings):
    value = str((config_settings or {}).get(_OPS_KEY, "ON")).strip().upper()
    return value not in ("OFF", "0", "FALSE", "NO")


def target_torch():
    """(version, CMake prefix) of the torch the installing environment
    imports, or None when it imports none."""
    try:
        r = subprocess.run([sys.executable, "-E", "-c", _PROBE], capture_output=True, text=True,
                           timeout=300, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or len(lines) < 2:
        return None
    return lines[-2].strip(), lines[-1].strip()


def _requires(config_settings, base):
    if _ops_wanted(config_settings) and target_torch() is None:
        return list(base) + ["torch"]
    return list(base)


def _settings(config_settings):
    settings = dict(config_settings or {})
    if _ops_wanted(settings) and _PREFIX_KEY not in settings:
        found = target_torch()
        if found is not None:
            sys.stderr.write("magi-aot: building the torch operators against torch %s of the "
                             "installing environment (%s)\n" % found)
            settings[_PREFIX_KEY] = found[1]
    return settings


def get_requires_for_build_wheel(config_settings=None):
    return _requires(config_settings, _skb.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings=None):
    return _requires(config_settings, _skb.get_requires_for_build_editable(config_settings))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _skb.build_wheel(wheel_directory, _settings(config_settings), metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _skb.build_editable(wheel_directory, _settings(config_settings), metadata_directory)
