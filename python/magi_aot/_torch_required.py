"""The one check every torch-only entry point makes first: without PyTorch
(or with one too old) the caller gets a TorchRequiredError saying what needs
it and what to install, instead of a bare ModuleNotFoundError from deep in
the package. The binding itself (open, save, inputs, fingerprint) never
needs torch."""
from __future__ import annotations

from types import ModuleType
from typing import Tuple

MIN_TORCH = (2, 4)


class TorchRequiredError(ImportError):
    """Raised by a torch-only function when PyTorch is missing or too old."""


def _version_tuple(text: str) -> Tuple[int, ...]:
    parts = []
    for p in text.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def require_torch(what: str) -> ModuleType:
    """Import and return torch for `what` (e.g. "magi_aot.fake_inputs()")."""
    need = "%s needs PyTorch >= %d.%d" % ((what,) + MIN_TORCH)
    try:
        import torch
    except ModuleNotFoundError:
        raise TorchRequiredError(need + "; it is not installed "
                                 "(pip install 'magi-aot[torch]' or a torch build for your CUDA)") from None
    have = getattr(torch, "__version__", "0.0")
    if _version_tuple(have) < MIN_TORCH:
        raise TorchRequiredError("%s; found %s" % (need, have))
    return torch
