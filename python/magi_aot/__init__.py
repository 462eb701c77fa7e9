"""magi_aot: save Dynamo/torch.fx graph regions as verified artifacts and
load them back (inputs as metadata, FakeTensors, fingerprints, copy-engine
gather rewrite), through libmagi_aot via ctypes.

torch is imported only by the functions that need it (save of a
GraphModule, the compile backend, fake_inputs); load/inputs/fingerprint of
files work without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from ._lib import MagiError, MagiUnsupported, lib as _library, lib_path
from ._torch_required import TorchRequiredError, require_torch as _require_torch
from .compile.backend import SaveBackend as _SaveBackend
from .compile.warm import warm_start
from .fx import graph_to_doc as _graph_to_doc
from .region import (Region, fingerprint, inputs, load, load_buffers, load_bytes, load_many, region_from_doc,
                     save, save_doc)
from . import cache  # noqa: E402,F401 - magi_aot.cache.cache_get / read_index without torch

if TYPE_CHECKING:
    import torch

    from .compile.backend import SaveBackend

__version__ = "0.1.0"


def graph_to_doc(gm: torch.fx.GraphModule, **kw: Any) -> Dict[str, Any]:
    """The magi-fx JSON v1 document (dict) of a GraphModule (see magi_aot.fx)."""
    _require_torch("magi_aot.graph_to_doc()")
    return _graph_to_doc(gm, **kw)


def save_backend(cache_dir: str, model_tag: str, **kw: Any) -> SaveBackend:
    """A torch.compile backend that saves every region into `cache_dir`
    (see magi_aot.compile.backend.SaveBackend)."""
    _require_torch("magi_aot.save_backend()")
    return _SaveBackend(cache_dir, model_tag, **kw)


def library_version() -> str:
    return _library.magi_version().decode()


__all__ = ["MagiError", "MagiUnsupported", "TorchRequiredError", "Region", "load", "load_buffers", "load_bytes",
           "load_many",
           "save", "save_doc",
           "fingerprint", "inputs", "region_from_doc", "graph_to_doc", "save_backend",
           "lib_path", "library_version", "warm_start"]
