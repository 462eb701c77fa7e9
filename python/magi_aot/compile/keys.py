"""The keys stored code depends on.

The environment key (`environment_key`), stored in each payload's header
and compared field by field with the running one before stored code is
loaded (`key_differences`): torch version and git revision, Python
version, CUDA version, Triton version, GPU architecture (sm_XY) or CPU
vector ISA, machine and a digest of the CPU's instruction-set flags
(Inductor builds CPU kernels with -march=native), the region's canonical
fingerprint as rewritten, and the transport the rewrite used ("as_saved":
no gather rewritten). MAGI_AOT_SIMULATE_KEY="field=value,..." overrides
fields of the running key (tests of a key miss).

Torch's and Triton's source-hash keys, recorded with stored code and
reused while it loads.

Loading Inductor code computes two keys that hash installed sources:
Inductor's `torch_key()` (every Python module of torch and its extension
libraries; it names the autotune choices and the compiled-kernel caches)
and Triton's `triton_key()` (Triton's compiler, backends and libtriton,
hundreds of megabytes; it names every cached kernel). Each is computed once
per process and took 0.3 s and 0.4 s of a warm start on one H200 host.

The store side records each key's value beside a fingerprint of the files
it hashes: the path, size and modification time of each (a stat, not a
read). The load side, while the stored module runs (`seeded`), answers each
key with its recorded value when the fingerprint of the same files is
unchanged, and otherwise leaves the key to be computed as usual. So a key is
only reused for exactly the files it was computed from, as Python's
bytecode cache trusts a source file's size and modification time.

The answer is given by swapping the key function, in the modules of torch
and Triton that hold it, for one returning the recorded value, and swapping
it back afterwards: for that span it is process-wide (another thread that
asks gets the same, correct, value).
"""
import collections
import contextlib
import functools
import hashlib
import os
import platform
import sys

from .. import config

__all__ = ["environment_key", "key_differences", "region_device", "KEY_FIELDS", "record", "seeded"]

KEY_FIELDS = ("torch", "torch_git", "python", "cuda", "triton", "device", "fingerprint",
              "transport")
SIMULATE_ENV = config.SIMULATE_KEY.name   # "field=value,..." overrides the running key


def _triton_version():
    try:
        import triton
        return triton.__version__
    except Exception:  # noqa: BLE001 - absent or broken: part of the key
        return None


def region_device(doc):
    """'cuda' when any placeholder lives on a CUDA device, else 'cpu'."""
    for n in doc["graph"]["nodes"]:
        if n.get("op") != "placeholder":
            continue
        ev = (n.get("meta") or {}).get("example_value")
        if isinstance(ev, dict) and str(ev.get("device", "")).startswith("cuda"):
            return "cuda"
    return "cpu"


def environment_key(device, fingerprint, transport):
    """The key stored code depends on, for the running process."""
    import torch
    if device == "cuda":
        cap = torch.cuda.get_device_capability()
        dev = "cuda:sm_%d%d" % cap
    else:
        # Inductor builds CPU kernels with -march=native: they hold for
        # a CPU with the same instruction-set flags, not for every CPU of
        # the same ATen capability class (two AVX-512 generations differ
        # in VBMI, VNNI, BF16, FP16: SIGILL)
        dev = "cpu:%s:%s:%s" % (torch.backends.cpu.get_cpu_capability(), platform.machine(),
                                cpu_isa_digest() or "flags-unknown")
    key = {"torch": torch.__version__, "torch_git": getattr(torch.version, "git_version", None),
           "python": "%d.%d" % sys.version_info[:2], "cuda": torch.version.cuda,
           "triton": _triton_version(), "device": dev, "fingerprint": fingerprint,
           "transport": transport}
    sim = config.SIMULATE_KEY.get()
    if sim:
        for item in sim.split(","):
            k, _, v = item.partition("=")
            if k in key:
                key[k] = v
    return key


def key_differences(stored, running):
    """[(field, stored value, running value)] for every field that differs."""
    return [(f, stored.get(f), running.get(f)) for f in KEY_FIELDS
            if stored.get(f) != running.get(f)]


def _cpu_fields():
    """{"model name", "flags"} of the first processor in /proc/cpuinfo
    (whitespace normalised), or None where the flags cannot be read."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            text = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    want = {}
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key in ("model name", "flags") and key not in want:
            want[key] = " ".join(val.split())
        if len(want) == 2:
            break
    return want if "flags" in want else None


def cpu_isa_digest():
    """A digest of the machine and this CPU's instruction-set flags (what
    -march=native resolves to for a given compiler), or None where they
    cannot be read: the stored CPU kernels' key field."""
    want = _cpu_fields()
    if want is None:
        return None
    return hashlib.sha256(("%s|%s" % (platform.machine(), want["flags"])).encode()).hexdigest()[:16]


def cpu_fingerprint():
    """A digest of this CPU's model name and feature flags (/proc/cpuinfo,
    first processor), or None where they cannot be read: the ISA probes'
    answers recorded on one CPU hold on another only if this matches."""
    want = _cpu_fields()
    if want is None:
        return None
    return hashlib.sha256(("%s|%s|%s" % (platform.machine(), want.get("model name", ""),
                                         want["flags"])).encode()).hexdigest()[:32]



# module/fn: where the key function is defined; package, packages_only,
# extra: the files it hashes (package directories only, when
# packages_only, and the extra files); holders: the packages whose modules
# may hold a reference to the function
_Key = collections.namedtuple("_Key", "module fn package packages_only extra holders")
_KEYS = {
    "torch_key": _Key("torch._inductor.codecache", "torch_key", "torch", True,
                      ("_inductor/codegen/aoti_runtime/interface.cpp", "_inductor/script.ld"),
                      ("torch._inductor", "torch._functorch", "torch._dynamo")),
    "triton_key": _Key("triton.runtime.cache", "triton_key", "triton", False, (),
                       ("triton", "torch._inductor")),
}
_SUFFIXES = (".py", ".so")


def _fingerprint(package, packages_only, extra):
    """sha256 hex of (relative path, size, mtime) of the package's .py and
    .so files (in package directories only when packages_only) and the extra
    files; None when the package is not importable."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = list(spec.submodule_search_locations)[0]
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        if packages_only:
            dirs[:] = sorted(x for x in dirs if os.path.exists(os.path.join(d, x, "__init__.py")))
        else:
            dirs.sort()
        for f in sorted(files):
            if f.endswith(_SUFFIXES):
                _stat_into(h, root, os.path.join(d, f))
    for rel in extra:
        _stat_into(h, root, os.path.join(root, rel))
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _files_of(key):
    """_fingerprint of a key's files, taken once per process (each region
    loaded or stored asks again): as torch and Triton compute the keys
    themselves once per process, a file changed while the process runs is
    not seen by either."""
    return _fingerprint(key.package, key.packages_only, key.extra)


def _stat_into(h, root, path):
    try:
        st = os.stat(path)
        h.update(b"%s %d %d\n" % (os.path.relpath(path, root).encode("utf-8", "surrogateescape"),
                                  st.st_size, st.st_mtime_ns))
    except OSError:
        h.update(b"%s missing\n" % os.path.relpath(path, root).encode("utf-8", "surrogateescape"))


def _encode(v):
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, str):
        return {"str": v}
    return None


def _decode(rec):
    if not isinstance(rec, dict):
        return None
    if isinstance(rec.get("bytes"), str):
        try:
            return bytes.fromhex(rec["bytes"])
        except ValueError:
            return None
    if isinstance(rec.get("str"), str):
        return rec["str"]
    return None


def record(names=("torch_key", "triton_key")):
    """{name: {"value": ..., "files": fingerprint}} for each key whose module
    this process has imported (computing the key, which the compile that
    just ran has already done: each is cached). Keys that cannot be read
    are left out: the load then computes them."""
    import sys
    out = {}
    for name in names:
        key = _KEYS[name]
        f = getattr(sys.modules.get(key.module), key.fn, None)
        if f is None:
            continue
        try:
            value = _encode(f())
            files = _files_of(key)
        except Exception:  # noqa: BLE001 - internals of another release: no seed
            continue
        if value is not None and files is not None:
            out[name] = {"value": value, "files": files}
    return out


def _holders(prefixes):
    """The globals dicts of the imported modules under prefixes."""
    import sys
    for m in list(sys.modules.values()):
        name = getattr(m, "__name__", None) or ""
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            d = getattr(m, "__dict__", None)
            if isinstance(d, dict):
                yield d


def _swap(prefixes, old, new):
    for d in _holders(prefixes):
        for k, v in list(d.items()):
            if v is old:
                d[k] = new


@contextlib.contextmanager
def seeded(recorded, report=None):
    """While the block runs, each recorded key whose files are unchanged is
    answered with its recorded value (in every module of torch and Triton
    holding the key function, those imported during the block included;
    all put back afterwards). report (a dict), when given, gets
    {name: "reused" | "files changed" | "not recorded" | "not importable"}."""
    import importlib
    done = []   # (prefixes, original, answer)
    recorded = recorded if isinstance(recorded, dict) else {}
    try:
        for name, key in _KEYS.items():
            rec = recorded.get(name)
            value = _decode(rec.get("value")) if isinstance(rec, dict) else None
            if value is None:
                if report is not None:
                    report[name] = "not recorded"
                continue
            try:
                if _files_of(key) != rec.get("files"):
                    if report is not None:
                        report[name] = "files changed"
                    continue
                orig = getattr(importlib.import_module(key.module), key.fn)
            except Exception:  # noqa: BLE001 - not importable here: computed as usual
                if report is not None:
                    report[name] = "not importable"
                continue

            def answer(_value=value):
                return _value
            answer.cache_clear = lambda: None   # callers may clear the original's cache
            _swap(key.holders, orig, answer)
            done.append((key.holders, orig, answer))
            if report is not None:
                report[name] = "reused"
        yield
    finally:
        for prefixes, orig, answer in reversed(done):
            _swap(prefixes, answer, orig)
