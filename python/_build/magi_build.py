"""The wheel's build backend: scikit-build-core, told which torch to build
the operator extension (magi_aot/_C, python/magi_aot/csrc) against.

An isolated `pip install ./python` runs the build in an environment that
holds only the build requirements, so the torch of the environment being
installed into is not importable there. This backend looks for it with the
same interpreter outside pip's isolation (`python -E`: pip isolates through
PYTHONPATH) and builds against exactly that torch: its CMake prefix goes to
CMake as MAGI_TORCH_CMAKE_PREFIX, and nothing is downloaded.

When that environment has no torch the build stops before compiling,
saying to install torch first or to build without the extension
(--config-settings=cmake.define.MAGI_TORCH_OPS=OFF). It does not fetch a
torch of its own for the build: pip would resolve it apart from the one
the `[torch]` extra installs (another version or another CUDA build, so
the extension would not load), and it can be gigabytes. The extension is
required otherwise too (pyproject.toml sets MAGI_TORCH_OPS=ON): a build
that cannot compile it fails, saying why, instead of installing a package
whose operators fall back to the slower Python kernels.
"""
import subprocess
import sys

from scikit_build_core import build as _skb
from scikit_build_core.build import (  # noqa: F401 - the hooks this backend does not change
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
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


class TorchMissing(RuntimeError):
    """The installing environment has no torch to build the extension against."""


def _settings(config_settings):
    settings = dict(config_settings or {})
    if _ops_wanted(settings) and _PREFIX_KEY not in settings:
        found = target_torch()
        if found is None:
            raise TorchMissing(
                "magi-aot: %s imports no torch, and the package's C++ torch operators "
                "(magi_aot/_C) are built against the torch of the environment being installed "
                "into. Install torch first (pip install torch, the build for your CUDA), then "
                "pip install './python[torch]' again; or install without the operators (they then "
                "run as the slower Python kernels): pip install ./python "
                "--config-settings=cmake.define.MAGI_TORCH_OPS=OFF" % sys.executable)
        sys.stderr.write("magi-aot: building the torch operators against torch %s of the "
                         "installing environment (%s)\n" % found)
        settings[_PREFIX_KEY] = found[1]
    return settings


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _skb.build_wheel(wheel_directory, _settings(config_settings), metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _skb.build_editable(wheel_directory, _settings(config_settings), metadata_directory)
