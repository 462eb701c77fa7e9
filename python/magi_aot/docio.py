"""A loaded region's document as Python objects, without a JSON detour.

Three paths give the same value (what json.loads gives for the text of
magi_json_write), or the same refusal (a string that is not UTF-8, an
encoded surrogate included: MagiError MAGI_ERR_FORMAT naming the node),
fastest first; document() takes the first available:

  direct   the optional extension module magi_aot._docbuild builds the
           dicts, lists and strings straight from the C region, as one
           emitter of the library's document walk (magi_doc_walk,
           include/magi_aot/docwalk.h): one str object per distinct string
           of the region, nothing encoded or decoded on the way.
  marshal  the library writes the document in CPython's marshal format
           (magi_marshal_write, include/magi_aot/marshal.h) and
           marshal.loads builds the objects.
  json     magi_json_write + json.loads (libraries without either).

The extension (_docbuild.abi3.so, CPython's limited API: one build for
Python 3.9 and later) is built by CMake when Python's development headers
are found, next to libmagi_aot.so. It is looked for, once per process:
  1. the file named by MAGI_AOT_DOCBUILD (a path); MAGI_AOT_DOCBUILD=0
     turns the direct path off (document() then uses marshal);
  2. next to the loaded library (the directory of magi_aot._lib.lib_path(),
     or of the file mapped for it when it was found by soname: an
     installed library, with the extension installed beside it);
  3. an installed magi_aot._docbuild.
It is used only when the library exports magi_doc_walk.

    from magi_aot.docio import document
    doc = document(cregion_ptr)      # a magi_region* (c_void_p or int)
"""
import ctypes
import glob
import importlib
import importlib.machinery
import importlib.util
import json
import marshal
import os
import sys
import threading
from ctypes import byref, c_size_t, c_void_p

from . import config
from ._lib import MagiError, MagiUnsupported, has, lib, lib_path

__all__ = ["document", "document_bytes", "document_direct", "document_json",
           "document_marshal", "extension", "extension_missing", "path_used"]

_EXT_NAME = "magi_aot._docbuild"
_ext_lock = threading.Lock()
# Filled once per process by extension(): "module" (the extension or None),
# "why" (why not), "fast" ((build, magi_doc_walk's address) or None).
_ext_state: dict = {}


def _load_from(path):
    loader = importlib.machinery.ExtensionFileLoader(_EXT_NAME, path)
    spec = importlib.util.spec_from_file_location(_EXT_NAME, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules.setdefault(_EXT_NAME, mod)
    return mod


def _lib_dir():
    """The directory of the loaded library; for one found by soname alone
    (ctypes.util.find_library gives "libmagi_aot.so.0"), the directory of
    the file the process mapped for it (Linux: /proc/self/maps)."""
    path = lib_path() or ""
    if os.path.dirname(path) or not path:
        return os.path.dirname(path)
    stem = path.split(".so")[0] + ".so"
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                f = line.split(None, 5)[-1].strip()
                if os.path.basename(f).startswith(stem) and os.path.isabs(f):
                    return os.path.dirname(f)
    except OSError:
        pass
    return ""


def _find_extension():
    """(module or None, reason when None)."""
    env = config.DOCBUILD.get()
    if env.lower() in ("0", "off", "no", "false"):
        return None, "turned off by MAGI_AOT_DOCBUILD=%s" % env
    if not has("magi_doc_walk"):
        return None, "the library has no magi_doc_walk"
    if env:
        return _load_from(env), None  # named explicitly: failing to load is an error
    d = _lib_dir()
    if d:
        for f in sorted(glob.glob(os.path.join(d, "_docbuild.abi3.so"))
                        + sorted(glob.glob(os.path.join(d, "_docbuild.cpython-*.so")))):
            try:
                return _load_from(f), None
            except ImportError:
                continue  # built for another Python: try the next, then the package
    try:
        return importlib.import_module(_EXT_NAME), None
    except ImportError:
        return None, "no _docbuild next to %s nor in the package" % (lib_path() or "the library")


def extension():
    """The extension module, or None (then extension_missing() says why)."""
    with _ext_lock:
        if "module" not in _ext_state:
            mod, why = _find_extension()
            _ext_state.update(module=mod, why=why,
                              fast=(mod.build, lib.address("magi_doc_walk")) if mod else None)
        return _ext_state["module"]


def _fast():
    """(build, walk address) or None, without the lock once looked for."""
    if "fast" not in _ext_state:
        extension()
    return _ext_state["fast"]


def extension_missing():
    """Why the direct path is unavailable ("" when it is available)."""
    return "" if extension() is not None else _ext_state.get("why", "")


def path_used():
    """The path document() takes: "direct", "marshal" or "json"."""
    if extension() is not None:
        return "direct"
    return "marshal" if has("magi_marshal_write") else "json"


def _addr(ptr):
    v = ptr.value if isinstance(ptr, c_void_p) else ptr
    if not v:
        raise ValueError("a NULL region")
    return v


def document_direct(ptr):
    """The document through the extension (MagiUnsupported when it is absent).
    A string that is not UTF-8 raises MagiError MAGI_ERR_FORMAT naming the
    node, as document_marshal and document_json do."""
    fast = _fast()
    if fast is None:
        raise MagiUnsupported("document extension (%s)" % extension_missing())
    build, walk = fast
    try:
        doc = build(walk, _addr(ptr))
    except UnicodeDecodeError as e:
        # the verdict of the marshal and JSON paths: MAGI_ERR_FORMAT naming the node
        where = "; ".join(getattr(e, "__notes__", ())) or "the region's document"
        raise MagiError(_ERR_FORMAT, "%s: a string is not UTF-8 (%s)" % (where, e),
                        "magi_doc_walk") from e
    if isinstance(doc, int):  # the library refused the walk: its message says why
        msg = lib.magi_last_error() or b""
        raise MagiError(doc, msg.decode("utf-8", "replace"), "magi_doc_walk")
    return doc


def document_bytes(ptr):
    """The marshal bytes of the region's document (bytes)."""
    p = c_void_p()
    n = c_size_t()
    lib.magi_marshal_write(byref(p), byref(n), ptr)
    try:
        return ctypes.string_at(p, n.value)
    finally:
        lib.magi_free(p)


def document_marshal(ptr):
    """The document through magi_marshal_write + marshal.loads."""
    p = c_void_p()
    n = c_size_t()
    lib.magi_marshal_write(byref(p), byref(n), ptr)
    try:  # read the library's buffer in place: no copy into a bytes object
        return marshal.loads(memoryview((ctypes.c_char * n.value).from_address(p.value)))
    finally:
        lib.magi_free(p)


_ERR_FORMAT = -4  # MAGI_ERR_FORMAT
_JSON_STRICT_UTF8 = 0x2  # MAGI_JSON_STRICT_UTF8: refuse a string that is not UTF-8


def document_json(ptr):
    """The same document through JSON text (the reference path). A string
    that is not UTF-8 is refused naming its node, as the other paths do
    (the plain writer would put U+FFFD in its place)."""
    p = c_void_p()
    n = c_size_t()
    lib.magi_json_write(byref(p), byref(n), ptr, _JSON_STRICT_UTF8)
    try:
        return json.loads(ctypes.string_at(p, n.value))
    finally:
        lib.magi_free(p)


def document(ptr):
    """The region's document (dict), through the fastest path available."""
    if _fast() is not None:
        return document_direct(ptr)
    if has("magi_marshal_write"):
        return document_marshal(ptr)
    return document_json(ptr)
