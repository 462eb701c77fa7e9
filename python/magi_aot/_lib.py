"""ctypes binding of libmagi_aot (no compiled extension).

The library is found, in this order:
  1. the file named by the environment variable MAGI_AOT_LIB (an override:
     when set, nothing else is tried);
  2. this package's directory (libmagi_aot.so, bundled by
     `pip install ./python` and by a wheel built from the checkout);
  3. a build tree next to this package's source checkout
     (<repo>/build*/libmagi_aot.so*, newest first; sanitizer builds skipped,
     since an ASan library cannot be loaded into a plain python3);
  4. the bundled library of an installed copy of the package elsewhere on
     sys.path (the checkout's package imported first, with the wheel
     installed);
  5. ctypes.util.find_library("magi_aot") (an installed library).

Only functions the loaded library exports are bound. A function that is
missing (an older library, or a module not built in) raises
MagiUnsupported naming it when called, never a fake result.

Ownership rules mirror the C headers: every region, arena, plan, cache
handle and text the library hands out is freed here (with try/finally), so
no Python object holds C memory past the call that made it, except the
owning wrappers: CRegion below (one magi_region) and cache._Cache (one
cache handle), freed by close() or at the end of their with-block, and
loaded.LoadedSet (one loader and its plan), freed by close() or when the
last Region or runtime that refers to it goes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import sys
import threading

from ctypes import (POINTER, Structure, byref, c_char, c_char_p, c_double, c_int,
                    c_int64, c_size_t, c_uint, c_uint8, c_uint32, c_uint64, c_void_p)
from typing import Any, Optional, TypeVar

from . import config

__all__ = ["MagiError", "MagiUnsupported", "lib", "lib_path", "has"]

def status_name(code: int) -> str:
    """The library's name of a status code (magi_status_str: one table, in
    C); "MAGI_ERR_<code>" when the library is not loaded or does not know it."""
    name = None
    try:
        lib._load()
    except OSError:  # no library: the number is all there is
        pass
    if lib._dll is not None and "magi_status_str" in lib._fns:
        name = lib._fns["magi_status_str"][0](int(code))
        name = name.decode() if name else None
    if not name or name == "MAGI_ERR_UNKNOWN":
        return "MAGI_OK" if code == 0 else "MAGI_ERR_%d" % code
    return name


@functools.lru_cache(maxsize=1)
def _code_table():
    """{status name: code} of codes 0 .. -255, built whole before it is
    returned (threads that ask at once each get a complete table; a table
    filled in place could be read half-filled)."""
    table = {}
    for code in range(0, -256, -1):
        table.setdefault(status_name(code), code)
    return table


def status_code(name: str) -> Optional[int]:
    """The status code the library names `name` ("MAGI_ERR_FORMAT" -> -4),
    or None."""
    return _code_table().get(name)


class MagiError(Exception):
    """A libmagi_aot call failed: .code (negative int), .status ("MAGI_ERR_FORMAT"),
    .message (the library's last-error text, naming file/section/node)."""

    def __init__(self, code: int, message: str, func: str = "") -> None:
        self.code = code
        self.status = status_name(code)
        self.message = message
        self.func = func
        super().__init__("%s: %s%s" % (self.status, message, (" (in %s)" % func) if func else ""))


class MagiUnsupported(MagiError):
    """The loaded library lacks a function (or feature) this call needs."""

    def __init__(self, what: str) -> None:
        super().__init__(-13, "libmagi_aot has no %s (not built into %s)" % (what, lib_path() or "the library"))


# ---------------------------------------------------------------- structs
def struct_version(rev, struct):
    """The version field of an options struct, as MAGI_STRUCT_VERSION builds
    it in C: revision << 16 | sizeof. The library compares it with its own,
    so a mirror here that lacks a field (or has a stale revision) is refused
    with MAGI_ERR_VERSION instead of being read past its end."""
    return ((rev << 16) | (ctypes.sizeof(struct) & 0xffff)) & 0xffffffff


class LoadOptions(Structure):
    """magi_read_limits (read_limits.h), revision 1."""
    REVISION = 1
    _fields_ = [("version", c_uint32), ("max_input_bytes", c_uint64),
                ("max_decompressed_bytes", c_uint64), ("max_depth", c_uint32),
                ("max_elements", c_uint64)]

    def __init__(self, **kw):
        super().__init__(version=struct_version(self.REVISION, type(self)), **kw)


class OpaqueSection(Structure):
    _fields_ = [("kind", c_uint32), ("data", c_void_p), ("len", c_size_t)]


class SectionInfo(Structure):
    _fields_ = [("kind", c_uint32), ("kind_name", c_char_p), ("offset", c_uint64),
                ("stored_size", c_uint64), ("raw_size", c_uint64), ("sha256", c_uint8 * 32)]


SECTION_COMPILED = 5


class SaveOptions(Structure):
    """magi_save_options (artifact.h), revision 1."""
    REVISION = 1
    _fields_ = [("version", c_uint32), ("zstd_level", c_int)]

    def __init__(self, **kw):
        super().__init__(version=struct_version(self.REVISION, type(self)), **kw)


class RegionStruct(Structure):
    """Leading fields of struct magi_region (graph.h, transparent)."""
    _fields_ = [("arena", c_void_p), ("flags", c_uint32), ("model_tag", c_char_p),
                ("model_idx", c_int64), ("traced_files", POINTER(c_char_p)),
                ("n_traced_files", c_uint32), ("compile_config_json", c_char_p),
                ("symbols", c_void_p), ("n_symbols", c_uint32),
                ("nodes", c_void_p), ("n_nodes", c_uint32),
                ("dropped_legacy", POINTER(c_char_p)), ("n_dropped_legacy", c_uint32),
                ("ignored", POINTER(c_char_p)), ("n_ignored", c_uint32)]


class ExprStruct(Structure):
    pass


ExprStruct._fields_ = [("kind", c_int), ("ival", c_int64), ("name", c_char_p),
                       ("kids", POINTER(POINTER(ExprStruct))), ("nkids", c_uint32),
                       ("fval", c_double)]

# The ctypes copies of the unstable structs (graph.h, expr.h: their layout
# may change in any release), checked against the library when it is loaded
# (magi_unstable_layout): (copy, C struct, whether the copy mirrors every
# field, so the sizes must agree too, or only the leading ones).
UNSTABLE_MIRRORS = ((RegionStruct, "magi_region", False), (ExprStruct, "magi_expr", True))


def check_layout(dll, path, mirrors=UNSTABLE_MIRRORS):
    """Raise OSError naming the first field (or size) on which a ctypes copy
    and the library at `path` disagree: the package and the library come
    from different builds, and reading the struct would read garbage."""
    try:
        f = dll.magi_unstable_layout
    except AttributeError:
        raise OSError("libmagi_aot at %s does not export magi_unstable_layout, so the layout of "
                      "the structs magi_aot/_lib.py mirrors cannot be checked: the library is older "
                      "than this package; use the library built with it" % path) from None
    f.restype, f.argtypes = c_int64, [c_char_p]
    for copy, cname, whole in mirrors:
        wants = [(cname + "." + field[0], getattr(copy, field[0]).offset, "offset")
                 for field in copy._fields_]
        if whole:
            wants.append((cname, ctypes.sizeof(copy), "size"))
        for name, mine, what in wants:
            theirs = f(name.encode())
            if theirs != mine:
                raise OSError("libmagi_aot at %s: %s of %s is %s there and %d in magi_aot/_lib.py's "
                              "ctypes copy (%s): the package and the library come from different "
                              "builds; install them together" %
                              (path, what, name, "unknown" if theirs < 0 else str(theirs), mine,
                               copy.__name__))


class Num(Structure):
    _fields_ = [("is_float", c_int), ("i", c_int64), ("f", c_double)]


class CachePutResult(Structure):
    _fields_ = [("sha256_hex", c_char * 65), ("published", c_int), ("quarantined", c_int)]


class CacheEntry(Structure):
    _fields_ = [("key", c_char * 201), ("sha256_hex", c_char * 65), ("size", c_uint64),
                ("file_bytes", c_uint64), ("atime_ns", c_int64), ("mtime_ns", c_int64)]


class SymmPlanOptions(Structure):
    """magi_symm_plan_options (symm.h), revision 3."""
    REVISION = 3
    _fields_ = [("version", c_uint32), ("transport", c_int), ("slot_align", c_uint32),
                ("window_cap_bytes", c_uint64), ("region_names", POINTER(c_char_p)),
                ("region_transports", POINTER(c_int)), ("cross_host_groups", POINTER(c_char_p)),
                ("n_cross_host_groups", c_uint32)]

    def __init__(self, **kw):
        super().__init__(version=struct_version(self.REVISION, type(self)), **kw)


class SymmGroup(Structure):
    _fields_ = [("name", c_char_p), ("size", c_uint32), ("ranks", POINTER(c_uint32)),
                ("comm", c_void_p)]


class SymmBackendConfig(Structure):
    """magi_symm_backend_config (symm.h), revision 3."""
    REVISION = 3
    _fields_ = [("version", c_uint32), ("rank", c_uint32), ("world", c_uint32),
                ("groups", POINTER(SymmGroup)), ("n_groups", c_uint32),
                ("rendezvous", c_char_p), ("timeout_ms", c_uint32), ("device", c_int),
                ("world_comm", c_void_p), ("job_id", c_char_p), ("max_window_bytes", c_uint64)]


class LoaderOptions(Structure):
    """magi_loader_options (load.h), revision 4."""
    REVISION = 4
    _fields_ = [("version", c_uint32), ("transport", c_int), ("window_cap_bytes", c_uint64),
                ("limits", POINTER(LoadOptions)), ("backend", c_char_p),
                ("bind", SymmBackendConfig), ("keep_cast_pad", c_int), ("rank_local", c_int),
                ("cross_host_groups", POINTER(c_char_p)), ("n_cross_host_groups", c_uint32)]

    def __init__(self, **kw):
        super().__init__(version=struct_version(self.REVISION, type(self)), **kw)
        self.bind.version = struct_version(SymmBackendConfig.REVISION, SymmBackendConfig)
        if not self.bind.world:
            self.bind.world = 1


LOAD_TRANSPORTS = {None: 0, "auto": 0, "nccl": 1, "copy_engine": 2}
SYMM_TRANSPORTS = {0: "copy_engine", 1: "nccl"}
JSON_READ_STRICT = 0x1  # MAGI_JSON_READ_STRICT (json.h)
TRANSPORT_SOURCES = {0: "option", 1: "compile_config", 2: "default"}


class UnbackedGuess(Structure):
    """magi_unbacked_guess (costs.h)."""
    _fields_ = [("name", c_char_p), ("value", c_int64), ("source", c_int)]


# MAGI_COST_MODEL_H200's unbacked_hint (costs.h): what the analytical model
# assumes for an unbacked symbol nothing in the graph sizes
COST_MODEL_UNBACKED_HINT = 256


class LoadedInfo(Structure):
    _fields_ = [("path", c_char_p), ("fingerprint", c_char * 65), ("artifact_v1", c_int),
                ("legacy_v0", c_int), ("transport", c_int), ("transport_source", c_int),
                ("n_rewritten", c_uint32), ("n_restored", c_uint32), ("n_inputs", c_uint32),
                ("sections_decoded", c_uint32), ("sections_hashed", c_uint32), ("n_lowered", c_uint32)]


class Lowered(Structure):
    """magi_lowered (lower.h): one DTensor redistribute and the lowering's decision."""
    _fields_ = [("node", c_char_p), ("weight", c_char_p), ("lowered", c_int), ("cast", c_int),
                ("padded", c_int), ("at_bind", c_int), ("gather", c_char_p), ("group", c_char_p), ("global_rows", c_int64),
                ("chunk_rows", c_int64), ("local_rows", c_int64), ("reason", c_char_p),
                ("shard_dim", c_int), ("rewrapped", c_int), ("group_stride", c_int64)]


class MeshGroup(Structure):
    """magi_mesh_group (load.h): a process group a region's DTensor
    placeholders name, with its mesh dimension's size and stride."""
    _fields_ = [("name", c_char_p), ("size", c_uint32), ("stride", c_int64)]


class SymmGather(Structure):
    _fields_ = [("node", c_uint32), ("name", c_char_p), ("from_", c_char_p), ("to", c_char_p),
                ("coalesced", c_int), ("already_symm", c_int), ("reason", c_int),
                ("detail", c_char_p), ("n_slots", c_uint32), ("slots", POINTER(c_uint32))]


class SymmWindow(Structure):
    _fields_ = [("dtype", c_char_p), ("group", c_char_p), ("group_size", c_uint32),
                ("part", c_uint32), ("bytes", c_uint64), ("first_slot", c_uint32),
                ("n_slots", c_uint32)]


class SymmSlot(Structure):
    _fields_ = [("weight", c_char_p), ("window", c_uint32), ("offset", c_uint64),
                ("nbytes", c_uint64), ("ndim", c_uint32), ("shape", POINTER(c_int64))]


class SymmBinding(Structure):
    _fields_ = [("node", c_uint32), ("placeholder", c_char_p), ("slot", c_uint32)]


class SymmTensor(Structure):
    """magi_symm_tensor (symm_registry.h): a tensor as the registry of bound
    tensors sees it. dtype: a row of magi_dtype_table() (magi_dtype_lookup)."""
    _fields_ = [("dtype", c_void_p), ("device_type", ctypes.c_int32), ("device_index", ctypes.c_int32),
                ("data", ctypes.c_size_t), ("ndim", c_uint32), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("data_version", c_int64)]


SYMM_DEVICE_CPU, SYMM_DEVICE_CUDA = 0, 1  # magi_symm_tensor.device_type
SYMM_LIVE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64)
SYMM_EQUALS_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint32)


class SymmRegistryHooks(Structure):
    """magi_symm_registry_hooks (symm_registry.h)."""
    _fields_ = [("live", SYMM_LIVE_FN), ("equals", SYMM_EQUALS_FN), ("ctx", c_void_p)]


class SymmFound(Structure):
    """magi_symm_found (symm_registry.h)."""
    _fields_ = [("owner", c_uint64), ("slot", c_uint32), ("view", c_int), ("offset", c_int64),
                ("by_identity", c_int)]


LOOKUP_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_int64))
LOOKUP_NUM_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(Num))

# name: (restype, argtypes). restype int => a magi_status, checked.
_STATUS = "status"
STATUS = _STATUS  # for lib.declare
_PROTOS = {
    "magi_version": (c_char_p, []),
    "magi_status_str": (c_char_p, [c_int]),
    "magi_last_error": (c_char_p, []),
    "magi_features": (c_uint, []),
    "magi_op_classify": (c_int, [c_int, c_char_p]),
    "magi_op_class_name": (c_char_p, [c_int]),
    "magi_opcode_name": (c_char_p, [c_int]),
    "magi_opcode_parse": (_STATUS, [POINTER(c_int), c_char_p]),
    "magi_free": (None, [c_void_p]),
    "magi_region_free": (None, [c_void_p]),
    "magi_region_count_placeholders": (c_uint32, [c_void_p]),
    "magi_json_read": (_STATUS, [POINTER(c_void_p), c_char_p, c_size_t, POINTER(LoadOptions)]),
    "magi_json_read_file": (_STATUS, [POINTER(c_void_p), c_char_p, POINTER(LoadOptions)]),
    "magi_json_read_ex": (_STATUS, [POINTER(c_void_p), c_char_p, c_size_t, POINTER(LoadOptions), c_uint]),
    "magi_region_check_names": (_STATUS, [c_void_p]),
    "magi_json_write": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p, c_uint]),
    "magi_marshal_write": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p]),
    "magi_doc_walk": (_STATUS, [c_void_p, c_void_p, c_void_p, POINTER(c_uint32)]),
    "magi_load_file": (_STATUS, [POINTER(c_void_p), c_char_p, POINTER(LoadOptions)]),
    "magi_artifact_save": (_STATUS, [c_void_p, c_char_p, POINTER(SaveOptions)]),
    "magi_artifact_encode": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p,
                                       POINTER(SaveOptions)]),
    "magi_artifact_encode_with": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p,
                                            POINTER(SaveOptions), POINTER(OpaqueSection),
                                            c_uint32]),
    "magi_artifact_read_section": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p,
                                             c_uint32]),
    "magi_artifact_get_section": (_STATUS, [POINTER(SectionInfo), c_void_p, c_uint32]),
    "magi_write_file_atomic": (_STATUS, [c_char_p, c_void_p, c_size_t]),
    "magi_arena_new": (_STATUS, [POINTER(c_void_p), c_size_t]),
    "magi_arena_free": (None, [c_void_p]),
    "magi_expr_parse": (_STATUS, [POINTER(POINTER(ExprStruct)), c_void_p, c_char_p, c_size_t,
                                  c_void_p]),
    "magi_expr_eval": (_STATUS, [POINTER(Num), POINTER(ExprStruct), LOOKUP_FN, c_void_p]),
    "magi_expr_eval_int": (_STATUS, [POINTER(c_int64), POINTER(ExprStruct), LOOKUP_FN, c_void_p]),
    "magi_expr_eval_int_num": (_STATUS, [POINTER(c_int64), POINTER(ExprStruct), LOOKUP_NUM_FN,
                                         c_void_p]),
    "magi_fingerprint_hex": (_STATUS, [c_char_p, c_void_p]),
    "magi_inputs_write_json": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p, c_uint]),
    "magi_artifact_open": (_STATUS, [POINTER(c_void_p), c_void_p, c_size_t, POINTER(LoadOptions)]),
    "magi_artifact_free": (None, [c_void_p]),
    "magi_artifact_load_region": (_STATUS, [POINTER(c_void_p), c_void_p]),
    "magi_cache_open": (_STATUS, [POINTER(c_void_p), c_char_p]),
    "magi_cache_free": (None, [c_void_p]),
    "magi_cache_put": (_STATUS, [POINTER(CachePutResult), c_void_p, c_char_p, c_void_p, c_size_t,
                                 c_uint]),
    "magi_cache_get": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), POINTER(CacheEntry), POINTER(c_int), c_void_p,
                                 c_char_p, c_char_p, c_uint64]),
    "magi_cache_region_key": (_STATUS, [c_char_p, c_void_p]),
    "magi_cache_check_owner": (_STATUS, [c_void_p, c_char_p]),
    "magi_cache_index_key": (_STATUS, [c_char_p, c_char_p]),
    "magi_symm_plan_build": (_STATUS, [POINTER(c_void_p), POINTER(c_void_p), c_uint32,
                                       POINTER(SymmPlanOptions)]),
    "magi_symm_plan_free": (None, [c_void_p]),
    "magi_symm_plan_windows": (POINTER(SymmWindow), [POINTER(c_uint32), c_void_p]),
    "magi_symm_plan_slots": (POINTER(SymmSlot), [POINTER(c_uint32), c_void_p]),
    "magi_symm_plan_gathers": (POINTER(SymmGather), [POINTER(c_uint32), c_void_p, c_uint32]),
    "magi_symm_plan_bindings": (POINTER(SymmBinding), [POINTER(c_uint32), c_void_p, c_uint32]),
    "magi_symm_plan_digest": (_STATUS, [POINTER(c_uint8), c_void_p]),
    "magi_symm_reason_name": (c_char_p, [c_int]),
    "magi_symm_rewrite": (_STATUS, [POINTER(c_uint32), c_void_p, c_void_p, c_uint32]),
    "magi_symm_transport_name": (c_char_p, [c_int]),
    "magi_loader_new": (_STATUS, [POINTER(c_void_p), POINTER(LoaderOptions)]),
    "magi_loader_free": (None, [c_void_p]),
    "magi_loader_load": (_STATUS, [c_void_p, POINTER(c_char_p), c_uint32]),
    "magi_loader_load_buffers": (_STATUS, [c_void_p, POINTER(c_void_p), POINTER(c_size_t),
                                           POINTER(c_char_p), c_uint32]),
    "magi_loader_count": (c_uint32, [c_void_p]),
    "magi_loader_region": (c_void_p, [c_void_p, c_uint32]),
    "magi_loader_info": (_STATUS, [POINTER(LoadedInfo), c_void_p, c_uint32]),
    "magi_loader_inputs_json": (c_char_p, [c_void_p, c_uint32]),
    "magi_loader_inputs_status": (c_int, [POINTER(c_char_p), c_void_p, c_uint32]),
    "magi_loader_plan": (c_void_p, [c_void_p]),
    "magi_loader_lowered": (POINTER(Lowered), [POINTER(c_uint32), c_void_p, c_uint32]),
    "magi_loader_mesh_groups": (POINTER(MeshGroup), [POINTER(c_uint32), c_void_p, c_uint32]),
    "magi_loader_section_count": (c_uint32, [c_void_p, c_uint32, c_uint32]),
    "magi_loader_read_section": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p, c_uint32,
                                           c_uint32, c_uint32]),
    "magi_localize": (_STATUS, [POINTER(c_uint32), c_void_p]),
    "magi_localize_rank": (_STATUS, [POINTER(c_uint32), c_void_p, POINTER(SymmBackendConfig)]),
    "magi_cost_keys": (_STATUS, [POINTER(c_void_p), c_void_p]),
    "magi_cost_keyset_free": (None, [c_void_p]),
    "magi_cost_keyset_node_count": (c_uint32, [c_void_p]),
    "magi_cost_keyset_node_key": (c_char_p, [c_void_p, c_uint32]),
    "magi_cost_unbacked_guesses": (_STATUS, [POINTER(c_void_p), POINTER(c_uint32), c_void_p, c_int64]),
    "magi_loader_backend": (c_void_p, [c_void_p]),
    "magi_loader_report": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p, c_uint]),
    "magi_loader_save": (_STATUS, [c_void_p, c_uint32, c_char_p]),
    "magi_version_number": (c_uint, []),
    "magi_symm_plan_encode": (_STATUS, [POINTER(c_void_p), POINTER(c_size_t), c_void_p]),
    "magi_symm_plan_compare": (_STATUS, [c_char_p, c_size_t, c_char_p, c_size_t]),
    "magi_symm_backend_find": (c_void_p, [c_char_p]),
    "magi_symm_backend_create": (_STATUS, [POINTER(c_void_p), c_void_p, c_void_p,
                                           POINTER(SymmBackendConfig)]),
    "magi_symm_backend_rendezvous": (_STATUS, [c_void_p]),
    "magi_symm_backend_free": (None, [c_void_p]),
    "magi_symm_backend_barrier": (_STATUS, [c_void_p, c_void_p]),
    "magi_symm_bind": (_STATUS, [c_void_p, c_uint32, c_void_p, c_uint64, c_void_p]),
    "magi_symm_local_slot_ptr": (_STATUS, [POINTER(c_void_p), c_void_p, c_uint32]),
    "magi_symm_all_gather": (_STATUS, [c_void_p, c_uint64, c_void_p, c_uint32, c_void_p]),
    "magi_symm_all_gather_coalesced": (_STATUS, [POINTER(c_void_p), POINTER(c_uint64), c_void_p,
                                                 c_uint32, POINTER(c_uint32), c_void_p]),
    "magi_symm_output_layout": (_STATUS, [c_void_p, c_uint32, POINTER(c_uint32), POINTER(c_uint64),
                                          POINTER(c_uint64)]),
    "magi_dtype_lookup": (c_void_p, [c_char_p]),
    "magi_symm_registry_new": (_STATUS, [POINTER(c_void_p)]),
    "magi_symm_registry_free": (None, [c_void_p]),
    "magi_symm_registry_add": (_STATUS, [c_void_p, c_uint64, c_char_p, c_uint32, c_uint64, c_char_p,
                                         POINTER(SymmTensor), POINTER(SymmRegistryHooks)]),
    "magi_symm_registry_bind": (_STATUS, [c_void_p, c_uint64, c_void_p, c_uint32, POINTER(SymmTensor),
                                          POINTER(SymmRegistryHooks)]),
    "magi_symm_registry_remove": (_STATUS, [c_void_p, c_uint64]),
    "magi_symm_registry_count": (c_uint64, [c_void_p]),
    "magi_symm_registry_lookup": (_STATUS, [POINTER(SymmFound), c_void_p, c_char_p, POINTER(SymmTensor),
                                            POINTER(SymmRegistryHooks)]),
    "magi_symm_check_version": (_STATUS, [c_char_p, c_uint32, c_int64, c_int64]),
}


_HERE = os.path.dirname(os.path.abspath(__file__))
_SANITIZER_TAGS = ("asan", "tsan", "ubsan", "msan", "sanit")

_NOT_FOUND_HELP = (
    "libmagi_aot not found. Install the package with its library: "
    "`pip install ./python` from the repository root (it compiles libmagi_aot "
    "and bundles it in the package); or build it in the checkout: "
    "`cmake -S . -B build && cmake --build build --target magi_aot`; "
    "or set MAGI_AOT_LIB to the path of a libmagi_aot.so")


def _bundled(d):
    """The library a wheel puts in a package directory d, if any."""
    for pattern in ("libmagi_aot.so", "libmagi_aot.so.*"):
        hits = sorted(glob.glob(os.path.join(d, pattern)))
        if hits:
            return hits[:1]
    return []


def _candidates():
    """(paths to try in order, the places looked in)."""
    env = config.LIB.get()
    if env:
        return [env], ["MAGI_AOT_LIB=" + env]
    out, looked = [], []
    # 2. bundled in this package
    out.extend(_bundled(_HERE))
    looked.append(_HERE)
    # 3. build trees of the checkout this package sits in
    root = os.path.dirname(os.path.dirname(_HERE))
    found = []
    for d in glob.glob(os.path.join(root, "build*")):
        base = os.path.basename(d).lower()
        if any(t in base for t in _SANITIZER_TAGS):
            continue
        for f in sorted(glob.glob(os.path.join(d, "libmagi_aot.so*"))):
            found.append(f)
            break
    found.sort(key=lambda f: os.path.getmtime(f), reverse=True)
    out.extend(found)
    looked.append(os.path.join(root, "build*"))
    # 4. another copy of the package on sys.path (an installed wheel)
    here = os.path.realpath(_HERE)
    for entry in sys.path:
        d = os.path.join(entry or os.getcwd(), "magi_aot")
        if os.path.isdir(d) and os.path.realpath(d) != here:
            out.extend(_bundled(d))
    looked.append("magi_aot/ on sys.path")
    # 5. the system's library search
    sysname = ctypes.util.find_library("magi_aot")
    if sysname:
        out.append(sysname)
    looked.append("the system library path")
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))], looked


class _Lib:
    """The loaded library plus its checked prototypes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._dll = None
        self._path = None
        self._fns = {}

    def _load(self):
        with self._lock:
            if self._dll is not None:
                return
            errors = []
            paths, looked = _candidates()
            for path in paths:
                try:
                    dll = ctypes.CDLL(path)
                except OSError as e:
                    errors.append("%s: %s" % (path, e))
                    continue
                check_layout(dll, path, UNSTABLE_MIRRORS)
                self._dll, self._path = dll, path
                break
            if self._dll is None:
                env = config.LIB.get()
                if env:
                    raise OSError("libmagi_aot not found at MAGI_AOT_LIB=%s (%s); point it "
                                  "at a libmagi_aot.so, or unset it to use the package's own "
                                  "library" % (env, "; ".join(errors)))
                raise OSError(_NOT_FOUND_HELP + ". Looked in: " + ", ".join(looked)
                              + ("; could not load: " + "; ".join(errors) if errors else ""))
            self._add(_PROTOS)

    def _add(self, protos):
        for name, (res, args) in protos.items():
            try:
                f = getattr(self._dll, name)
            except AttributeError:
                continue
            f.restype = c_int if res is _STATUS else res
            f.argtypes = args
            self._fns[name] = (f, res is _STATUS)

    @property
    def path(self):
        self._load()
        return self._path

    def has(self, name):
        self._load()
        return name in self._fns

    def declare(self, protos):
        """Add prototypes {name: (restype or STATUS, argtypes)} that a module
        of the package keeps beside the structs they take (a STATUS
        function is checked as the table's are); a name the library does
        not export is left out (has() says False)."""
        self._load()
        self._add(protos)

    def address(self, name):
        """The address (int) of an exported function, for C code that calls
        it directly (magi_aot._docbuild); None when the library lacks it."""
        self._load()
        ent = self._fns.get(name)
        return ctypes.cast(ent[0], c_void_p).value if ent else None

    def __getattr__(self, name):
        if not name.startswith("magi_"):
            raise AttributeError(name)
        self._load()
        ent = self._fns.get(name)
        if ent is None:
            raise MagiUnsupported(name + "()")
        f, checked = ent
        if not checked:
            return f

        def call(*args):
            st = f(*args)
            if st != 0:
                msg = self._fns["magi_last_error"][0]()
                raise MagiError(st, (msg or b"").decode("utf-8", "replace"), name)
            return st
        call.__name__ = name
        return call


lib = _Lib()


def lib_path() -> Optional[str]:
    try:
        return lib.path
    except OSError:
        return None


def has(name: str) -> bool:
    return lib.has(name)


def cstr(s):
    return os.fsencode(s) if not isinstance(s, bytes) else s


def take_text(ptr, n):
    """Copy n bytes the library allocated, then free them."""
    try:
        return ctypes.string_at(ptr, n)
    finally:
        lib.magi_free(ptr)


_Handle = TypeVar("_Handle", bound="OwnedHandle")


class OwnedHandle:
    """A library object owned through self.ptr: close() (or the end of a
    with-block) frees it once, with the library function named by the
    subclass's FREE."""
    FREE = ""  # the library function that frees self.ptr (each subclass names it)
    ptr: Any

    def close(self) -> None:
        if self.ptr:
            getattr(lib, self.FREE)(self.ptr)
            self.ptr = None

    def __enter__(self: _Handle) -> _Handle:
        return self

    def __exit__(self, *a: object) -> None:
        self.close()


class CRegion(OwnedHandle):
    """Owns one magi_region*; close() (or the with-block) frees it."""
    FREE = "magi_region_free"

    def __init__(self, ptr):
        self.ptr = ptr

    @classmethod
    def from_json_text(cls, text, strict=False):
        """Read a magi-fx document; strict: refuse unknown keys
        (MAGI_JSON_READ_STRICT) instead of listing them in ignored()."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        out = c_void_p()
        if strict:
            lib.magi_json_read_ex(byref(out), text, len(text), None, JSON_READ_STRICT)
        else:
            lib.magi_json_read(byref(out), text, len(text), None)
        return cls(out)

    @classmethod
    def from_artifact_bytes(cls, data):
        """Open artifact bytes (v1 or legacy v0) held in memory, verify, load."""
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        art = c_void_p()
        lib.magi_artifact_open(byref(art), buf, len(data), None)
        try:
            out = c_void_p()
            lib.magi_artifact_load_region(byref(out), art)
            return cls(out)
        finally:
            lib.magi_artifact_free(art)

    @classmethod
    def from_file(cls, path):
        out = c_void_p()
        lib.magi_load_file(byref(out), cstr(path), None)
        return cls(out)

    @property
    def struct(self):
        return ctypes.cast(self.ptr, POINTER(RegionStruct)).contents

    def to_json_text(self, pretty=False):
        p = c_void_p()
        n = c_size_t()
        lib.magi_json_write(byref(p), byref(n), self.ptr, 1 if pretty else 0)
        return take_text(p, n.value).decode("utf-8")

    def dropped_legacy(self):
        s = self.struct
        return [s.dropped_legacy[i].decode() for i in range(s.n_dropped_legacy)]

    def ignored(self):
        s = self.struct
        return [s.ignored[i].decode() for i in range(s.n_ignored)]

    def inputs_json(self, concrete=False):
        p = c_void_p()
        n = c_size_t()
        lib.magi_inputs_write_json(byref(p), byref(n), self.ptr, 1 if concrete else 0)
        return take_text(p, n.value).decode("utf-8")

    def cache_key(self):
        buf = ctypes.create_string_buffer(65)
        lib.magi_cache_region_key(buf, self.ptr)
        return buf.value.decode()

    def fingerprint(self):
        buf = ctypes.create_string_buffer(65)
        lib.magi_fingerprint_hex(buf, self.ptr)
        return buf.value.decode()

    def encode(self, zstd_level=0):
        """Artifact v1 bytes (zstd_level 0: the library default, FORMAT.md §3)."""
        p = c_void_p()
        n = c_size_t()
        opts = SaveOptions(zstd_level=int(zstd_level))
        lib.magi_artifact_encode(byref(p), byref(n), self.ptr, byref(opts))
        return take_text(p, n.value)

    def encode_with(self, extra, zstd_level=0):
        """Artifact v1 bytes plus opaque sections: extra = [(kind, bytes), ...]."""
        bufs = [ctypes.create_string_buffer(bytes(d), len(d)) for _, d in extra]
        arr = (OpaqueSection * max(1, len(extra)))()
        for i, ((kind, d), b) in enumerate(zip(extra, bufs)):
            arr[i] = OpaqueSection(kind, ctypes.cast(b, c_void_p), len(d))
        p = c_void_p()
        n = c_size_t()
        opts = SaveOptions(zstd_level=int(zstd_level))
        lib.magi_artifact_encode_with(byref(p), byref(n), self.ptr, byref(opts), arr, len(extra))
        return take_text(p, n.value)

    def save(self, path):
        lib.magi_artifact_save(self.ptr, cstr(path), None)


def read_opaque_sections(data, kind=SECTION_COMPILED):
    """The decompressed payloads of every section of `kind` in artifact bytes,
    in table order. Each is SHA-256-verified by the library before it is
    decompressed (MagiError MAGI_ERR_DIGEST naming the section otherwise)."""
    buf = ctypes.create_string_buffer(bytes(data), len(data))
    art = c_void_p()
    lib.magi_artifact_open(byref(art), buf, len(data), None)
    try:
        out = []
        # sections are enumerated until NOT_FOUND (no magi_artifact_info
        # mirror here: that struct grows with the library)
        for i in range(1 << 20):
            si = SectionInfo()
            try:
                lib.magi_artifact_get_section(byref(si), art, i)
            except MagiError as e:
                if e.status == "MAGI_ERR_NOT_FOUND":
                    break
                raise
            if si.kind != kind:
                continue
            p = c_void_p()
            n = c_size_t()
            lib.magi_artifact_read_section(byref(p), byref(n), art, i)
            out.append(take_text(p, n.value))
        return out
    finally:
        lib.magi_artifact_free(art)
