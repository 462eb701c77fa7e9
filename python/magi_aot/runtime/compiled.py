"""Compiled code of a SymmRuntime's region: compiled once with Inductor,
stored, and loaded by every later process (SymmRuntime.compile).

    fn, report = rt.compile(0, cache_dir="/var/cache/me/magi")
    out = fn(*rt.args(0, {"x": x}))
    report["served"]        # "stored" (no Inductor compile) or "compiled"

What is compiled is the region as this rank runs it: the scheduled graph
(rt.graph_module(region): rank-local, the gathers on the magi operators,
every c10d gather on the caller's groups, each launch where the runtime's
schedule put it), from FakeTensors of its inputs, by the warm start's
mechanism (magi_aot.compile.code.compile_region: Inductor's standalone
compile, the generated module, the C++ kernel libraries). The launch-order
pass (magi_aot.compile.launch_order, installed with the operators) is in
Inductor's hooks while it compiles, so the stored module launches each
gather where the schedule put it, and a process that loads it runs that
order without running Inductor.

The key (`code_key`) holds everything the generated code depends on:

- the environment (compile.keys.environment_key: torch and its git
  revision, Python, CUDA, Triton, the device: GPU architecture or CPU
  vector ISA and flags);
- the canonical fingerprint (docs/FINGERPRINT.md) of the graph that is
  compiled, as rewritten, remapped and scheduled: node references are by
  position, so it already changes with the node order; the order itself
  ("order": a digest of the node names in graph order) is in the key as
  well, so no change of the canonical form can let one schedule's code
  serve another;
- the transport the load's rewrite used;
- the binding facts the graph bakes in: keep_cast_pad and each weight's
  bind transform (the cast and pad folded into the bound shard), the
  c10d group names and the groups staged through the host;
- the compile options, the grad mode (off: an inference graph) and the
  launch-order pass's identity (its uuid);
- this module's format version.

The cache entry is "symmcode." + the SHA-256 of the key's canonical JSON,
holding one compile.code payload (pack/unpack) whose header repeats the key
in full: a load compares it field by field with the running key.

Stored code is code: it is loaded only when only this user can have
written the entry (magi_aot.cache: the cache's directories and the entry
file owned by this user and writable by nobody else) or when the caller
opts in (trust_compiled=True or MAGI_AOT_TRUST_COMPILED=1; compile.code's
will_load). Otherwise the region is compiled, the report says why, and the
entry is replaced by this process's own (as is an entry that does not
serve: a malformed payload, a key that differs, code that does not load). A cache directory that does not
exist is created private to this user (0700); the C library publishes an
entry atomically (a writer killed at any point leaves none; two ranks
storing the same key end with one valid entry).

Thread safety: a call compiles or loads with Inductor, whose settings are
process-wide; do not run two calls, or a call and another Inductor
compile, at once. The callables returned may be called from any thread.
"""
import hashlib
import json
import os
import time

from .._lib import MagiError
from . import ops
from ..cache import _Cache, cache_get_entry
from ..region import fingerprint

__all__ = ["compile_region_code", "code_key", "cache_key_of", "RegionCode", "CODE_VERSION", "KEY_PREFIX"]

CODE_VERSION = 1
KEY_PREFIX = "symmcode."
COMPILER = "inductor-standalone/symm-runtime"


def _digest(obj):
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _launch_order_pass():
    """The uuid of the pass in Inductor's launch-order hook (None when
    none is installed or it has no uuid)."""
    from ..compile.launch_order import HOOK
    import torch._inductor.config as config
    p = getattr(config, HOOK, None)
    u = getattr(p, "uuid", None)
    return u() if callable(u) else None


def code_key(rt, loaded, gm, options=None):
    """The key the compiled code of `loaded` (one of rt's regions) depends
    on, for the graph module `gm` that is compiled (rt.graph_module of it):
    a dict of JSON values (see the module doc)."""
    from ..compile.code import transport_used
    from ..compile.keys import environment_key
    import torch
    device = rt.device.type
    if device == "cuda":
        with torch.cuda.device(rt.device):
            key = environment_key(device, fingerprint(gm), transport_used(loaded))
    else:
        key = environment_key(device, fingerprint(gm), transport_used(loaded))
    transforms = [[p["name"], (p.get("example_value") or {}).get("bind_transform")]
                  for p in loaded.placeholders]
    key.update({
        "format": CODE_VERSION,
        "order": _digest([n.name for n in gm.graph.nodes]),
        "bind": {"keep_cast_pad": rt.keep_cast_pad,
                 "transforms": [t for t in transforms if t[1]]},
        "groups": {"c10d": dict(sorted(rt.c10d_group_names.items())),
                   "host_staged": sorted(rt.host_staged_groups)},
        "options": json.loads(json.dumps(options or {}, sort_keys=True, default=str)),
        "grad_enabled": False,
        "launch_order_pass": _launch_order_pass(),
    })
    return key


def cache_key_of(key):
    """The cache entry name of a key dict."""
    return KEY_PREFIX + _digest(key)


class RegionCode:
    """The compiled region as a callable: fn(*rt.args(region, values)) ->
    list of the region's outputs. Runs with grad off (the code was compiled
    as an inference graph)."""

    def __init__(self, call, served):
        self._call = call
        self.served = served

    def __call__(self, *args):
        import torch
        with torch.no_grad():
            out = self._call(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]


def _with_example_values(gm, fake_args, fake_mode):
    """Record each node's FakeTensor value as Dynamo would
    (meta["example_value"]), so Inductor's standalone compile takes the
    graph's own shapes ("from_graph") in `fake_mode`."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    with enable_python_dispatcher():
        FakeTensorProp(gm, mode=fake_mode).propagate_dont_convert_inputs(*fake_args)
    for n in gm.graph.nodes:
        if "val" in n.meta and "example_value" not in n.meta:
            n.meta["example_value"] = n.meta["val"]


def _overlap(blobs):
    """code_overlap (compile.launch_order) of the stored generated module,
    or None where none is stored (not directly loadable)."""
    from ..compile.launch_order import code_overlap
    src = blobs.get("direct.py")
    return code_overlap(src.decode("utf-8")) if src is not None else None


def _compile(rt, loaded, gm, options, timings):
    """(callable, [(blob, bytes)]): the scheduled graph through the warm
    start's compile, with grad off and the launch-order pass installed."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from ..compile.code import compile_region
    t = time.perf_counter()
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    args = list(rt.fake_inputs(loaded, fake_mode))
    _with_example_values(gm, args, fake_mode)
    with torch.no_grad():
        art, blobs = compile_region(gm, args, options=options)
    timings["compile_s"] = time.perf_counter() - t
    return art, blobs


def _private_root(cache_dir):
    """Create the cache directory private to this user (0700) when it does
    not exist (an existing one is left as it is: the owner check decides
    what is loaded from it)."""
    try:
        os.makedirs(cache_dir, 0o700)
    except FileExistsError:
        pass


def _load(blobs, timings):
    """(callable, code path, why not directly) of a verified payload."""
    from ..compile.code import load_direct, load_standalone
    fn, why = load_direct(blobs, timings)
    if fn is not None:
        return fn, "direct", None
    return load_standalone(blobs, timings), "standalone", why


def _stored(data, name, key, report, timings):
    """The callable of a trusted entry's payload, or None with
    report["reason"] saying why it does not serve (a malformed payload,
    a key field that differs, code that does not load: compiled instead)."""
    from ..compile.payload import unpack
    try:
        header, blobs = unpack(data)
    except MagiError as e:
        report["reason"] = "entry %s: %s" % (name, e.message)
        return None
    stored = header.get("key") if isinstance(header.get("key"), dict) else {}
    diff = [(f, stored.get(f), key.get(f)) for f in sorted(set(stored) | set(key))
            if stored.get(f) != key.get(f)]
    if diff or header.get("compiler") != COMPILER:
        f = diff[0] if diff else ("compiler", header.get("compiler"), COMPILER)
        report["reason"] = "entry %s: key '%s' differs: stored %r, running %r" % ((name,) + f)
        return None
    try:
        fn, report["code_path"], report["code_path_reason"] = _load(blobs, timings)
    except Exception as e:  # noqa: BLE001 - code that does not load is compiled again
        report["reason"] = "entry %s: stored code did not load: %s: %s" % (name, type(e).__name__, e)
        report["code_path"] = None
        return None
    report["served"] = "stored"
    report["overlap"] = _overlap(blobs)
    return fn


def compile_region_code(rt, region=0, cache_dir=None, *, options=None, trust_compiled=None):
    """SymmRuntime.compile: (RegionCode, report). See the module doc.

    report = {"served": "stored" | "compiled", "reason": None | why no
    stored code served, "key": the cache entry name, "key_fields": the key,
    "code_path": "direct" | "standalone" | None (how stored code was
    loaded), "code_path_reason", "untrusted": None | why the entry's writer
    is not known to be this user, "published": whether this call stored
    its code, "overlap": code_overlap of the generated module (None where
    none is stored), "timings": {...}}."""
    from ..compile.payload import make_header, pack
    from ..compile.trust import TRUST_ENV, will_load
    from ..compile.launch_order import install
    t0 = time.perf_counter()
    timings = {}
    ops.register()
    # Inductor's settings are per thread: the pass goes into this thread's
    # (idempotent), before the key records it
    install()
    loaded = rt._region(region)
    gm = rt.graph_module(loaded)
    t = time.perf_counter()
    key = code_key(rt, loaded, gm, options)
    name = cache_key_of(key)
    timings["key_s"] = time.perf_counter() - t
    report = {"served": None, "reason": None, "key": name, "key_fields": key, "code_path": None,
              "code_path_reason": None, "untrusted": None, "published": False, "overlap": None,
              "timings": timings}
    data = None
    existed = False
    if cache_dir is None:
        report["reason"] = "no cache directory given"
    else:
        cache_dir = os.fspath(cache_dir)
        _private_root(cache_dir)
        t = time.perf_counter()
        data, report["untrusted"] = cache_get_entry(cache_dir, name)
        timings["read_s"] = time.perf_counter() - t
        existed = data is not None
        if data is None:
            report["reason"] = "no compiled code stored under %s" % name
        elif not will_load(report["untrusted"], trust_compiled):
            report["reason"] = (
                "stored code not loaded: %s; compiled code runs as this user, so it is loaded "
                "only from a cache only this user can write (trust_compiled=True or %s=1 "
                "loads it anyway)" % (report["untrusted"], TRUST_ENV))
            data = None
    if data is not None:
        fn = _stored(data, name, key, report, timings)
        if fn is not None:
            timings["total_s"] = time.perf_counter() - t0
            return RegionCode(fn, "stored"), report
    fn, blobs = _compile(rt, loaded, gm, options, timings)
    report["served"] = "compiled"
    report["overlap"] = _overlap(dict(blobs))
    if cache_dir is not None:
        header = make_header(key, (), [{"name": n.name, "source": None} for n in gm.graph.nodes
                                       if n.op == "placeholder"], key["options"], False)
        header["compiler"] = COMPILER
        payload = pack(header, blobs)
        t = time.perf_counter()
        try:
            with _Cache(cache_dir) as c:
                # an entry that did not serve (another writer's, one that
                # does not load) is replaced by this process's own; else the
                # first publish wins
                res = c.put(name, payload, replace=existed)
            report["published"] = bool(res.published)
        except MagiError as e:
            report["store_error"] = e.message
        timings["store_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t0
    return RegionCode(fn, "compiled"), report
