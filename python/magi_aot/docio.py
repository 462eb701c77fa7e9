"""A loaded region's document as Python objects, without a JSON detour.

The C library writes the magi-fx JSON v1 document in CPython's marshal
format (magi_marshal_write, include/magi_aot/marshal.h) and marshal.loads
builds the dicts and lists: the same value json.loads gives for the text of
magi_json_write, in a fraction of the time (every distinct string is one
object, referenced). A library without magi_marshal_write falls back to
the JSON text.

    from magi_aot.docio import document
    doc = document(cregion_ptr)      # a magi_region* (c_void_p or int)
"""
import ctypes
import json
import marshal
from ctypes import byref, c_size_t, c_void_p

from ._lib import has, lib

__all__ = ["document", "document_bytes", "document_json"]


def document_bytes(ptr):
    """The marshal bytes of the region's document (bytes)."""
    p = c_void_p()
    n = c_size_t()
    lib.magi_marshal_write(byref(p), byref(n), ptr)
    try:
        return ctypes.string_at(p, n.value)
    finally:
        lib.magi_free(p)


def document_json(ptr):
    """The same document through JSON text (the reference path)."""
    p = c_void_p()
    n = c_size_t()
    lib.magi_json_write(byref(p), byref(n), ptr, 0)
    try:
        return json.loads(ctypes.string_at(p, n.value))
    finally:
        lib.magi_free(p)


def document(ptr):
    """The region's document (dict): marshal when the library has it, else JSON."""
    if not has("magi_marshal_write"):
        return document_json(ptr)
    p = c_void_p()
    n = c_size_t()
    lib.magi_marshal_write(byref(p), byref(n), ptr)
    try:  # read the library's buffer in place: no copy into a bytes object
        return marshal.loads(memoryview((ctypes.c_char * n.value).from_address(p.value)))
    finally:
        lib.magi_free(p)
