"""The documented path of magi_aot.runtime.ops (the torch operators
magi::symm_all_gather[_coalesced]: IMPLEMENTATION, REGISTRY, OP_ERRORS,
as_magi_error): this module is magi_aot.runtime.ops itself, so its state is
one."""
import sys

from .runtime import ops as _ops

sys.modules[__name__] = _ops
