"""Bind a model to its stored region: a compiled forward without torch.compile.

    model = Model(cfg); model.load_state_dict(sd)
    fwd = magi_aot.bind_model(model, "/cache", "llama")
    out = fwd(input_ids)           # the region's outputs (a tuple)
    fwd.report                     # how it was served, and why

The region's placeholders are bound by the Dynamo source each one was
taken from (recorded by the save backend): `L['self']...._parameters['w']`
and `._buffers[...]` resolve to the model's tensors once, at bind time, and
are checked against the placeholder's dtype, shape and device (an error
names the parameter); `L['x']` / `L['args'][0]` resolve to the call's
inputs; `L['x'].size()[1]` (a dynamic size Dynamo passed as a SymInt) to
that input's size.

How the forward is obtained, in order:
  1. the model's region list is in the cache and its one region's stored
     code matches the running key and traced sources, and only this user
     can have written the entry (the cache's directories and the entry file
     are this user's, writable by nobody else) or the caller opted in
     (trust_compiled=True, MAGI_AOT_TRUST_COMPILED=1): loaded directly (no
     Dynamo trace, no Inductor compile);
  2. stored code exists but a key field differs (torch, GPU arch, ...), or
     the entry is not known to be this user's own (a group-shared cache):
     the region is compiled from its stored graph and rebuilt fake inputs
     (its targets resolved against the loader's allow-list);
  3. nothing stored, or a traced source file changed (the stored graph may
     be stale): the first call traces the model with torch.compile and the
     save backend (store_code=True), which stores graph and code for the
     next process, then binds to the fresh region.
`report["served"]` is "stored", "compiled" or "traced"; `report["reason"]`
says why the stored code was not used (the key field or the file).

A model with graph breaks has several regions joined by Python code that
only Dynamo's bytecode knows; the helper needs a single region and says so
(MagiError MAGI_ERR_UNSUPPORTED naming the count) rather than guessing
how they connect.
"""
import inspect
import re
import time

from ._lib import MagiError

__all__ = ["bind_model", "BoundForward", "parse_source"]

_ROOT = re.compile(r"L\['([^'\\]+)'\]")
_STEP = re.compile(r"\._modules\['([^'\\]*)'\]|\._parameters\['([^'\\]*)'\]|"
                   r"\._buffers\['([^'\\]*)'\]|\.size\(\)\[(\d+)\]|\.stride\(\)\[(\d+)\]|"
                   r"\.storage_offset\(\)|\[(\d+)\]|\['([^'\\]*)'\]|\.([A-Za-z_]\w*)")


def _err(code, msg):
    return MagiError(code, msg, "bind_model")


def parse_source(text):
    """(root name, [(op, arg)]) of a Dynamo source name; ops: "module",
    "param", "buffer", "size", "stride", "offset", "index", "key", "attr".
    Raises MagiError MAGI_ERR_UNSUPPORTED for any other form (globals,
    calls, ...)."""
    m = _ROOT.match(text or "")
    if not m:
        raise _err(-13, "source %r is not a local of the compiled frame" % (text,))
    root, pos, steps = m.group(1), m.end(), []
    names = ("module", "param", "buffer", "size", "stride", "index", "key", "attr")
    while pos < len(text):
        s = _STEP.match(text, pos)
        if not s:
            raise _err(-13, "source %r: cannot follow '%s'" % (text, text[pos:]))
        for i, g in enumerate(s.groups()):
            if g is not None:
                op = names[i]
                steps.append((op, int(g) if op in ("size", "stride", "index") else g))
                break
        else:
            steps.append(("offset", None))
        pos = s.end()
    return root, steps


def _follow(obj, steps, text):
    for op, a in steps:
        try:
            if op == "module":
                obj = obj._modules[a]
            elif op == "param":
                obj = obj._parameters[a]
            elif op == "buffer":
                obj = obj._buffers[a]
            elif op == "size":
                obj = obj.size()[a]
            elif op == "stride":
                obj = obj.stride()[a]
            elif op == "offset":
                obj = obj.storage_offset()
            elif op in ("index", "key"):
                obj = obj[a]
            else:
                obj = getattr(obj, a)
        except (KeyError, IndexError, AttributeError, TypeError):
            raise _err(-14, "%s: not found in the model or inputs (at %s %r)" % (text, op, a))
        if obj is None:
            raise _err(-14, "%s: missing (None)" % text)
    return obj


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _check_tensor(t, ph, text):
    import torch
    ev = ph.get("example_value") or {}
    if not isinstance(t, torch.Tensor):
        raise _err(-11, "%s: expected a tensor, found %s" % (text, type(t).__name__))
    want = ev.get("dtype")
    if want and want != _dtype_name(t):
        raise _err(-11, "%s: dtype %s, the region was compiled for %s" % (text, t.dtype, want))
    shape = ev.get("shape")
    if shape is not None:
        ok = len(shape) == t.dim() and all(not isinstance(d, int) or d == s
                                           for d, s in zip(shape, t.shape))
        if not ok:
            raise _err(-11, "%s: shape %s, the region was compiled for %s"
                       % (text, list(t.shape), shape))
    dev = ev.get("device")
    if dev and t.device.type != str(dev).split(":")[0]:
        raise _err(-11, "%s: on %s, the region was compiled for %s" % (text, t.device, dev))


class BoundForward:
    """forward(*inputs) -> the region's outputs. Attributes: report, region
    (magi_aot.Region or None before the first traced call), fn (the
    compiled callable)."""

    def __init__(self, model, cache_dir, model_tag, transport, dynamic, store_code,
                 trust_compiled=None, allow_targets=()):
        self.model = model
        self.trust_compiled = trust_compiled
        self.allow_targets = tuple(allow_targets or ())
        self.cache_dir = cache_dir
        self.model_tag = model_tag
        self.transport = transport
        self.dynamic = dynamic
        self.store_code = store_code
        self.region = None
        self.fn = None
        self.report = {"served": None, "reason": None}
        self._argnames = [p.name for p in inspect.signature(model.forward).parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._plan = None

    # -- binding
    def _bind(self, region, sources):
        phs = region.placeholders
        if len(sources) != len(phs):
            raise _err(-11, "region has %d placeholders, the index records %d sources"
                       % (len(phs), len(sources)))
        plan = []
        for ph, src in zip(phs, sources):
            text = src.get("source")
            root, steps = parse_source(text)
            if root == "self":
                t = _follow(self.model, steps, text)
                _check_tensor(t, ph, text)
                plan.append(("const", t))
            elif root == "args":
                if not steps or steps[0][0] != "index":
                    raise _err(-13, "source %r: expected L['args'][N]" % text)
                plan.append(("input", steps[0][1], steps[1:], text))
            elif root in self._argnames:
                plan.append(("input", self._argnames.index(root), steps, text))
            else:
                raise _err(-13, "source %r: '%s' is neither the model nor an argument of "
                           "its forward %s" % (text, root, self._argnames))
        self._plan = plan

    def _args(self, inputs):
        out = []
        for p in self._plan:
            if p[0] == "const":
                out.append(p[1])
                continue
            _, i, steps, text = p
            if i >= len(inputs):
                raise _err(-1, "%s: forward got %d inputs" % (text, len(inputs)))
            out.append(_follow(inputs[i], steps, text))
        return out

    # -- obtaining the code
    def _from_cache(self, own_code=None):
        """None once loaded, else why the model must be traced. own_code:
        {key: payload} this process has just compiled and stored (a
        payload read back equal to one of them is this process's own)."""
        from .backend import cache_get_entry, read_index
        from .compiled import load_region_code, transport_used
        from ._lib import read_opaque_sections
        from .region import load_bytes
        idx = read_index(self.cache_dir, self.model_tag)
        if idx is None:
            return "no region stored for model '%s'" % self.model_tag
        regions = idx.get("regions") or []
        if len(regions) != 1:
            raise _err(-13, "model '%s' has %d regions (graph breaks); bind_model needs a "
                       "single region" % (self.model_tag, len(regions)))
        ent = regions[0]
        data, untrusted = cache_get_entry(self.cache_dir, ent["key"])
        if data is None:
            return "region %s is listed but not in the cache" % ent["key"]
        t = time.perf_counter()
        region = load_bytes(data, transport=self.transport)
        payloads = read_opaque_sections(data)   # digest-verified first
        mine = (own_code or {}).get(ent["key"])
        if untrusted and mine is not None and mine in payloads:
            payloads, untrusted = [mine], None   # the bytes this process compiled
        used = transport_used(region)
        load_s = time.perf_counter() - t
        from .compiled import choose
        _, _, why = choose(region, payloads, used)
        if why and why.startswith("source changed"):
            return why
        self._bind(region, ent["sources"])  # a missing/mismatched tensor fails before loading
        from .compiled import region_device, use_triton_cache
        if region_device(region.doc) == "cuda":
            use_triton_cache(self.cache_dir)
        fn, rep = load_region_code(region, payloads, transport_used=used, untrusted=untrusted,
                                   trust_compiled=self.trust_compiled,
                                   allow_targets=self.allow_targets)
        rep["timings"]["artifact_load_s"] = load_s
        self.region, self.fn = region, fn
        self.report.update(rep)
        return None

    def _trace(self, inputs, why):
        import torch
        from .backend import SaveBackend
        be = SaveBackend(self.cache_dir, self.model_tag, store_code=True, strict=True)
        t = time.perf_counter()
        compiled = torch.compile(self.model, backend=be, dynamic=self.dynamic, fullgraph=False)
        compiled(*inputs)
        ents = [e for e in be.entries if not e.error]
        if len(ents) != 1:
            raise _err(-13, "model '%s' traced into %d regions (graph breaks); bind_model "
                       "needs a single region" % (self.model_tag, len(ents)))
        err = self._from_cache(own_code=dict(be.stored_code))
        if err:
            raise _err(-14, "region not found after tracing: %s" % err)
        self.report.update({"served": "traced", "reason": why,
                            "trace_s": time.perf_counter() - t})

    def __call__(self, *inputs):
        if self.fn is None:
            why = self._from_cache()
            if why:
                self._trace(inputs, why)
        return self.fn(*self._args(inputs))


def bind_model(model, cache_dir, model_tag, *, transport=None, dynamic=True, load_now=True,
               trust_compiled=None, allow_targets=()):
    """A BoundForward for `model` from the regions stored under model_tag in
    cache_dir (see the module doc). load_now: read and load the stored code
    now (errors such as a missing parameter surface here) rather than on
    the first call. trust_compiled: load stored code even from a cache
    others can write (default: MAGI_AOT_TRUST_COMPILED=1; otherwise such a
    region is compiled from its graph and report["reason"] says why).
    allow_targets: graph targets past the loader's allow-list
    (magi_aot.targets)."""
    b = BoundForward(model, cache_dir, model_tag, transport, dynamic, True, trust_compiled,
                     allow_targets)
    if load_now:
        why = b._from_cache()
        if why:
            b.report["reason"] = why
    return b
