"""The stored-code payload: its format and its digests.

A payload is what the C library stores as an opaque COMPILED section
(kind 5: zstd, SHA-256; FORMAT.md); the library never looks inside:

    b"MAGICODE" | u32 LE version (1) | u32 LE header length | header JSON |
    blobs back to back, in the order the header lists them

    header = {"key": {...}, "traced_files": {path: sha256}, "placeholders":
              [{"name", "source"}], "blobs": [{"name", "size", "sha256"}],
              "compiler": "inductor-standalone", "options": {...}}

`pack` writes one, `unpack` reads one back, checking every size against the
bytes present and every blob's SHA-256 against the header (the header is
JSON, so nothing is unpickled before the digests match). The key is
keys.environment_key's; "traced_files" records the SHA-256 of each source
file Dynamo traced (`file_checksums`), compared with the files as they are
when the code is loaded (`changed_files`); "placeholders" the Dynamo source
each graph input was bound from (`placeholder_sources`).
"""
import hashlib
import json
import os
import stat
import struct

from .._lib import MagiError

__all__ = ["pack", "unpack", "header_of", "make_header", "file_checksums", "changed_files", "placeholder_sources",
           "read_regular"]

MAGIC = b"MAGICODE"
VERSION = 1
MAX_HEADER = 64 << 20


def _err(msg, code=-4):
    return MagiError(code, "compiled section: " + msg, "magi_aot.compile.payload")


def pack(header, blobs):
    """Payload bytes: header dict + [(name, bytes)] (see module doc)."""
    header = dict(header)
    header["blobs"] = [{"name": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                       for n, b in blobs]
    h = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return b"".join([MAGIC, struct.pack("<II", VERSION, len(h)), h] + [b for _, b in blobs])


def _header(data):
    """(header, its end offset) of a payload (memoryview)."""
    if len(data) < 16 or bytes(data[:8]) != MAGIC:
        raise _err("not a magi compiled-code payload (bad magic)")
    ver, hlen = struct.unpack("<II", data[8:16])
    if ver != VERSION:
        raise _err("payload version %d, this reader knows %d" % (ver, VERSION), -5)
    if hlen > MAX_HEADER or 16 + hlen > len(data):
        raise _err("header of %d bytes does not fit in %d" % (hlen, len(data)))
    try:
        header = json.loads(bytes(data[16:16 + hlen]).decode("utf-8"))
    except ValueError as e:
        raise _err("header is not JSON: %s" % e)
    if not isinstance(header, dict) or not isinstance(header.get("blobs"), list):
        raise _err("header without a blob list")
    return header, 16 + hlen


def header_of(data):
    """The header of a payload, its blobs neither read nor hashed (what a
    caller that loads no code reads, such as the grad mode a region is
    compiled in); MagiError MAGI_ERR_FORMAT when it is malformed."""
    return _header(memoryview(data))[0]


def unpack(data):
    """(header, {name: bytes}) of a payload; MagiError MAGI_ERR_FORMAT on
    anything malformed (sizes are checked against the bytes present, every
    blob's SHA-256 against the header)."""
    data = memoryview(data)
    header, off = _header(data)
    blobs = {}
    for b in header["blobs"]:
        if not isinstance(b, dict) or not isinstance(b.get("size"), int) or b["size"] < 0:
            raise _err("bad blob entry %r" % (b,))
        end = off + b["size"]
        if end > len(data):
            raise _err("blob '%s' of %d bytes passes the end" % (b.get("name"), b["size"]))
        raw = bytes(data[off:end])
        if hashlib.sha256(raw).hexdigest() != b.get("sha256"):
            raise _err("blob '%s': SHA-256 mismatch" % b.get("name"), -6)
        blobs[str(b.get("name"))] = raw
        off = end
    if off != len(data):
        raise _err("%d trailing bytes" % (len(data) - off))
    return header, blobs


def make_header(key, traced_files, placeholders, options=None, grad_enabled=False):
    return {"key": key, "traced_files": file_checksums(traced_files),
            "placeholders": placeholders, "compiler": "inductor-standalone",
            "options": options or {}, "grad_enabled": bool(grad_enabled)}


MAX_TRACED_FILE = 16 << 20     # a traced source file larger than this counts as unreadable
MAX_TRACED_TOTAL = 256 << 20   # bytes read for one call of file_checksums, all files together


def read_regular(path, limit):
    """The bytes of `path` when it is a regular file of at most `limit`
    bytes, else None. The path names come from a stored header, so nothing
    else is ever read: a FIFO (whose open would wait for a writer), a
    device (/dev/zero never ends), a directory. The type is checked before
    the open and again on the descriptor, which is opened non-blocking and
    read at most limit + 1 bytes (a file that grows is refused too)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except (OSError, TypeError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        parts, n = [], 0
        while n <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - n))
            if not b:
                break
            parts.append(b)
            n += len(b)
        return None if n > limit else b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def file_checksums(paths):
    """{path: sha256 hex, or None when it is not a readable regular file of
    at most MAX_TRACED_FILE bytes}. At most MAX_TRACED_TOTAL bytes are read
    in all; files past that budget are None too."""
    out = {}
    budget = MAX_TRACED_TOTAL
    for p in paths:
        data = read_regular(p, min(MAX_TRACED_FILE, budget)) if budget > 0 else None
        if data is None:
            out[p] = None
            continue
        budget -= len(data)
        out[p] = hashlib.sha256(data).hexdigest()
    return out


def changed_files(recorded):
    """Files whose content differs from the recorded SHA-256 (or vanished,
    or are no longer a bounded regular file)."""
    if not isinstance(recorded, dict):
        raise _err("traced_files is not an object")
    now = file_checksums(recorded)
    return sorted(p for p, h in recorded.items() if now.get(p) != h)


def placeholder_sources(gm):
    """[{"name", "source"}] of the graph's placeholders: the Dynamo source
    (`L['self']._modules['fc']._parameters['weight']`, `L['x']`,
    `L['x'].size()[1]`) each one was bound from; None where unknown."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        src = None
        ga = n.meta.get("grapharg")
        s = getattr(ga, "source", None)
        if s is not None:
            name = s.name
            src = name() if callable(name) else name
        out.append({"name": n.name, "source": src})
    return out
