"""The cross-process cache directory (libmagi_aot's magi_cache_*): a
handle per call (_Cache), verified reads of an entry (cache_get_bytes,
cache_get_entry with the owner check, cache_get loading it as a Region),
and the key and reader of a model's region list (index_key, read_index),
which the save backend (magi_aot.compile.backend) publishes and the warm
start (magi_aot.compile.warm) reads.

No torch: reading a cache works without PyTorch.
"""
from __future__ import annotations

import ctypes
import json
import os
from ctypes import byref, c_void_p
from typing import Any, Dict, Optional, Tuple

from ._lib import CachePutResult, MagiError, OwnedHandle, cstr, has, lib
from .region import Region, StrPath, load_buffers, load_bytes

__all__ = ["cache_get", "cache_get_bytes", "cache_get_entry", "index_key", "read_index",
           "read_index_entry"]


class _Cache(OwnedHandle):
    """Owns a magi_cache* for one call."""
    FREE = "magi_cache_free"

    def __init__(self, path: str) -> None:
        self.ptr = c_void_p()
        lib.magi_cache_open(byref(self.ptr), cstr(path))

    def put(self, key: str, data: bytes, replace: bool = False) -> CachePutResult:
        res = CachePutResult()
        lib.magi_cache_put(byref(res), self.ptr, key.encode(), data, len(data),
                           1 if replace else 0)
        return res

    def get_or_none(self, key: str) -> Optional[bytes]:
        try:
            return self.get(key)
        except MagiError as e:
            if e.status == "MAGI_ERR_NOT_FOUND":
                return None
            raise

    def get(self, key: str) -> bytes:
        p = c_void_p()
        n = ctypes.c_size_t()
        lib.magi_cache_get(byref(p), byref(n), None, None, self.ptr, key.encode(), None, 0)
        try:
            return ctypes.string_at(p, n.value)
        finally:
            lib.magi_free(p)

    def owner_problem(self, key: str) -> Optional[str]:
        """None when only this user can have written the entry under key
        (magi_cache_check_owner: the cache's directories and the entry file
        are this user's and writable by nobody else), else why not."""
        if not has("magi_cache_check_owner"):
            return "this libmagi_aot cannot tell who wrote the cache (no magi_cache_check_owner)"
        try:
            lib.magi_cache_check_owner(self.ptr, key.encode())
        except MagiError as e:
            return e.message
        return None



def cache_get_bytes(cache_dir: StrPath, key: str) -> Optional[bytes]:
    """The verified bytes stored under `key`, or None when there is none."""
    with _Cache(os.fspath(cache_dir)) as c:
        return c.get_or_none(key)


def cache_get_entry(cache_dir: StrPath, key: str) -> Tuple[Optional[bytes], Optional[str]]:
    """(verified bytes or None, owner problem): the bytes stored under `key`
    and None when only this user can have written them, else a sentence
    saying why not (a group-shared cache, a file others can write; see
    _Cache.owner_problem). Both come through one handle, so the check is
    on the directories the read used."""
    with _Cache(os.fspath(cache_dir)) as c:
        data = c.get_or_none(key)
        return data, (None if data is None else c.owner_problem(key))


def cache_get(cache_dir: StrPath, key: str, *, transport: Optional[str] = None, rank: Optional[int] = None,
              world: Optional[int] = None, keep_cast_pad: bool = False) -> Region:
    """Load the region stored under `key` in a cache directory (verified).
    rank, world, keep_cast_pad: as magi_aot.load (a rank-local load, which
    a SymmRuntime of that rank binds as it stands)."""
    with _Cache(os.fspath(cache_dir)) as c:
        data = c.get(key)
    if world is None:
        return load_bytes(data, transport=transport)
    return load_buffers([data], ["cache entry %s" % key], transport=transport, rank=rank, world=world,
                        keep_cast_pad=keep_cast_pad)[0]


def index_key(model_tag: str) -> str:
    """Cache key of a model's region list (magi_cache_index_key: the one
    the library and `magi-aot cache rm DIR --model TAG` use)."""
    out = ctypes.create_string_buffer(256)
    lib.magi_cache_index_key(out, str(model_tag).encode("utf-8", "replace"))
    return out.value.decode("ascii")


def read_index(cache_dir: StrPath, model_tag: str) -> Optional[Dict[str, Any]]:
    """The region list the backend published for model_tag, or None."""
    return read_index_entry(cache_dir, model_tag)[0]


def read_index_entry(cache_dir: StrPath, model_tag: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(region list or None, owner problem): the index as read_index,
    with the owner check of cache_get_entry (None when only this user can
    have written it, else why not). An index is data: whoever reads it
    from a cache others can write treats what it names accordingly."""
    key = index_key(model_tag)
    data, problem = cache_get_entry(cache_dir, key)
    if data is None:
        return None, None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise MagiError(-4, "cache entry %s: not a region index: %s" % (key, e),
                        "read_index") from None
    if not isinstance(doc, dict):
        raise MagiError(-4, "cache entry %s: not a region index (a JSON %s)"
                        % (key, type(doc).__name__), "read_index")
    return doc, problem
