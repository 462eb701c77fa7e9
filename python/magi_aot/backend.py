"""torch.compile backend helper: the "save tool" a runtime plugs in.

    backend = magi_aot.save_backend("/cache", model_tag="llama", compiler=None)
    model = torch.compile(model, backend=backend, dynamic=True)
    model(x)                       # every region Dynamo hands over is saved
    backend.entries                # [SavedRegion(model_idx, key, fingerprint, ...)]

Each region is walked (metadata only), checked by the C reader, encoded as
an artifact v1 and published into the cross-process cache directory
(magi_cache_put: atomic, digest-verified) under magi_cache_region_key (the
key the CLI's `cache put` uses: the canonical structural fingerprint, so
ranks whose symbols are numbered differently share one entry). The backend
then returns a runnable callable: `compiler(gm, example_inputs)` when a
compiler is given (e.g. the inductor backend), else gm.forward (eager).

A failure to save never breaks the model: the error is recorded in
entry.error and logged (strict=True raises instead).
"""
import ctypes
import json
import logging
import os
import threading
import time
from ctypes import byref, c_void_p

from ._lib import CachePutResult, CRegion, cstr, has, lib
from .region import _dumps, load_bytes

__all__ = ["SaveBackend", "SavedRegion", "cache_get"]

log = logging.getLogger("magi_aot")


class SavedRegion:
    """What the backend did with one region."""

    __slots__ = ("model_tag", "model_idx", "key", "fingerprint", "nodes", "bytes",
                 "published", "walk_seconds", "save_seconds", "error")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "SavedRegion(%r)" % self.as_dict()


class _Cache:
    """Owns a magi_cache* for one call."""

    def __init__(self, path):
        self.ptr = c_void_p()
        lib.magi_cache_open(byref(self.ptr), cstr(path))

    def put(self, key, data):
        res = CachePutResult()
        lib.magi_cache_put(self.ptr, key.encode(), data, len(data), 0, byref(res))
        return res

    def get(self, key):
        p = c_void_p()
        n = ctypes.c_size_t()
        lib.magi_cache_get(self.ptr, key.encode(), None, 0, byref(p), byref(n), None, None)
        try:
            return ctypes.string_at(p, n.value)
        finally:
            lib.magi_free(p)

    def close(self):
        if self.ptr:
            lib.magi_cache_free(self.ptr)
            self.ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def cache_get(cache_dir, key, *, transport=None):
    """Load the region stored under `key` in a cache directory (verified)."""
    with _Cache(os.fspath(cache_dir)) as c:
        data = c.get(key)
    return load_bytes(data, transport=transport)


def _traced_files():
    """Source files Dynamo traced for the region being compiled, if known."""
    try:
        from torch._guards import TracingContext
        ctx = TracingContext.try_get()
    except Exception:
        return []
    codes = getattr(ctx, "traced_code", None) or ()
    return sorted({c.co_filename for c in codes if getattr(c, "co_filename", None)})


class SaveBackend:
    """A torch.compile backend that saves each region into a cache directory.

    cache_dir       the cache root (created if needed)
    model_tag       recorded in every region; model_idx counts regions from
                    start_idx in the order Dynamo hands them over
    compile_config  JSON-able dict carried verbatim
    compiler        optional backend (callable or registered name) that
                    produces the runnable callable; default: gm.forward
    strict          raise when saving fails instead of logging
    zstd_level      artifact compression level (0: the library default, 19)
    Thread-safe: model_idx allocation and the entries list are locked.
    """

    def __init__(self, cache_dir, model_tag, *, compile_config=None, compiler=None,
                 start_idx=0, strict=False, zstd_level=0):
        self.cache_dir = os.fspath(cache_dir)
        self.model_tag = model_tag
        self.compile_config = compile_config
        self.compiler = compiler
        self.strict = strict
        self.zstd_level = zstd_level
        self.entries = []
        self._next = start_idx
        self._lock = threading.Lock()
        for fn in ("magi_cache_open", "magi_cache_put", "magi_cache_region_key"):
            if not has(fn):
                from ._lib import MagiUnsupported
                raise MagiUnsupported(fn + "()")

    def save_region(self, gm, model_idx):
        from .fx import graph_to_doc
        t0 = time.perf_counter()
        doc = graph_to_doc(gm, model_tag=self.model_tag, model_idx=model_idx,
                           traced_files=_traced_files(), compile_config=self.compile_config)
        text = _dumps(doc)
        t1 = time.perf_counter()
        with CRegion.from_json_text(text) as r:
            data = r.encode(self.zstd_level)
            # the CLI's key: the canonical structural fingerprint, so ranks
            # whose Dynamo numbered symbols differently share one entry
            key = r.cache_key()
            fp = r.fingerprint() if has("magi_fingerprint_hex") else None
            n_nodes = r.struct.n_nodes
        with _Cache(self.cache_dir) as c:
            res = c.put(key, data)
        t2 = time.perf_counter()
        return SavedRegion(model_tag=self.model_tag, model_idx=model_idx, key=key,
                           fingerprint=fp, nodes=n_nodes, bytes=len(data),
                           published=bool(res.published), walk_seconds=t1 - t0,
                           save_seconds=t2 - t0)

    def __call__(self, gm, example_inputs):
        with self._lock:
            idx = self._next
            self._next += 1
        try:
            ent = self.save_region(gm, idx)
        except Exception as e:  # noqa: BLE001 - never break the model
            if self.strict:
                raise
            log.warning("magi_aot: region %s#%d not saved: %s", self.model_tag, idx, e)
            ent = SavedRegion(model_tag=self.model_tag, model_idx=idx, error=str(e))
        with self._lock:
            self.entries.append(ent)
        if self.compiler is None:
            return gm.forward
        compiler = self.compiler
        if isinstance(compiler, str):
            from torch._dynamo import lookup_backend
            compiler = lookup_backend(compiler)
        return compiler(gm, example_inputs)

    def index(self):
        """JSON-able list of the saved regions (a runtime may store it next
        to the cache to find regions by model_tag/model_idx)."""
        with self._lock:
            return [e.as_dict() for e in self.entries]

    def write_index(self, path):
        data = json.dumps(self.index(), indent=1).encode()
        lib.magi_write_file_atomic(cstr(path), data, len(data))
