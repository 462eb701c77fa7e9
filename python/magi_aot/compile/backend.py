"""The torch.compile save backend: the "save tool" a runtime plugs in.

    backend = magi_aot.save_backend("/cache", model_tag="llama", compiler=None)
    model = torch.compile(model, backend=backend, dynamic=True)
    model(x)                       # every region Dynamo hands over is saved
    backend.entries                # [SavedRegion(model_idx, key, fingerprint, ...)]

Each region is walked (metadata only), checked by the C reader, encoded as
an artifact v1 and published into the cross-process cache directory
(magi_cache_put: atomic, digest-verified) under magi_cache_region_key (the
key the CLI's `cache put` uses: the canonical structural fingerprint and
the compile_config, so ranks whose symbols are numbered differently share
one entry and one graph under two configs gets two). The backend
then returns a runnable callable: `compiler(gm, example_inputs)` when a
compiler is given (e.g. the inductor backend), else gm.forward (eager).

With store_code=True the backend also compiles each region with
Inductor's standalone compile and stores the compiled code in the same
artifact as an opaque COMPILED section keyed by the environment
(magi_aot.compile.code); variants for other keys already in the entry are
kept. It then returns the compiled callable, and publishes the model's
region list (keys in model_idx order, each placeholder's Dynamo source)
under the cache key `index_key(model_tag)` for magi_aot.compile.warm.

A failure to save never breaks the model: the error is recorded in
entry.error and logged (strict=True raises instead).
"""
import json
import logging
import os
import weakref
import threading
import time
import warnings

from .._lib import SECTION_COMPILED, CRegion, MagiError, MagiUnsupported, cstr, has, lib, read_opaque_sections
from ..cache import _Cache, index_key
from ..region import _dumps
from ..fx import UnrebuildableRegion, graph_to_doc, rebuild_problems
from .code import compile_region, use_triton_cache
from .dynamo_source import follow, parse_source
from .grad import inference_copy, with_autograd
from .keys import environment_key, region_device
from .payload import make_header, pack, placeholder_sources, unpack

__all__ = ["SaveBackend", "SavedRegion", "SideEffectsRefused", "replayed_side_effects"]

MAX_VARIANTS = 4  # compiled-code variants kept per region (one per key)
MAX_INDEX_VARIANTS = 8  # regions of other calls kept in a model's index (keep_regions)

log = logging.getLogger("magi_aot")


class SavedRegion:
    """What the backend did with one region."""

    __slots__ = ("model_tag", "model_idx", "key", "fingerprint", "nodes", "bytes",
                 "published", "walk_seconds", "save_seconds", "error", "code_bytes",
                 "compile_seconds", "sources", "frame", "guards", "shapes")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "SavedRegion(%r)" % self.as_dict()


def _traced_files():
    """Source files Dynamo traced for the region being compiled, if known."""
    try:
        from torch._guards import TracingContext
        ctx = TracingContext.try_get()
    except Exception:
        return []
    codes = getattr(ctx, "traced_code", None) or ()
    return sorted({c.co_filename for c in codes if getattr(c, "co_filename", None)})


_CONSTANT_GUARDS = ("CONSTANT_MATCH", "EQUALS_MATCH")


def _plain(v):
    return v is None or isinstance(v, (bool, int, float, str))


def _frame_facts(gm):
    """What the region's compiled code assumes beyond its placeholders, as
    Dynamo knows it while it compiles the frame: (frame, guards, shapes).

    frame   [frame id, compile of that frame] (a recompile has a higher second)
    guards  [{"source", "value"}]: every local of the frame (the module's
            attributes, the call's arguments) Dynamo guarded to a constant
            (CONSTANT_MATCH, EQUALS_MATCH) holding None, a bool, an int, a
            float or a string, with its value now; None where this torch
            does not say
    shapes  {"ranges": {symbol: [lo, hi or None]}, "guards": [expression]}
            of the region's size symbols (the ShapeEnv's value ranges and
            its guards, after Inductor compiled the region)"""
    frame = guards = shapes = None
    try:
        from torch._guards import CompileContext, TracingContext
        cid = CompileContext.current_compile_id()
        if cid is not None:
            frame = [cid.frame_id, cid.frame_compile_id]
        ctx = TracingContext.try_get()
    except Exception:  # noqa: BLE001 - another torch: nothing known
        return frame, guards, shapes
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
        scope = tx.output.local_scope
        guards, seen = [], set()
        for g in ctx.guards_context.dynamo_guards:
            if getattr(g.create_fn, "__name__", "") not in _CONSTANT_GUARDS or g.name in seen:
                continue
            try:
                root, steps = parse_source(g.name)
                v = follow(scope[root], steps, g.name, True)
            except (MagiError, KeyError):
                continue
            if _plain(v) and not (isinstance(v, float) and v != v):
                seen.add(g.name)
                guards.append({"source": g.name, "value": v})
    except Exception:  # noqa: BLE001
        guards = None
    try:
        se = ctx.fake_mode.shape_env
        names = set()
        for n in gm.graph.nodes:
            ev = n.meta.get("example_value")
            for x in list(getattr(ev, "shape", ())) + ([ev] if hasattr(ev, "node") else []):
                expr = getattr(getattr(x, "node", None), "expr", None)
                if expr is not None:
                    names |= {str(s) for s in expr.free_symbols}
        ranges = {}
        for sym, vr in se.var_to_range.items():
            if str(sym) in names and sym.is_integer:
                # a bound is a sympy Integer or unbounded: torch's int_oo
                # says is_finite (and int() of it raises), so ask is_Integer
                ranges[str(sym)] = [int(b) if getattr(b, "is_Integer", False) else None
                                    for b in (vr.lower, vr.upper)]
        shapes = {"ranges": ranges,
                  "guards": [str(g.expr) for g in se.guards
                             if {str(s) for s in g.expr.free_symbols} <= names
                             and g.expr.free_symbols]}
    except Exception:  # noqa: BLE001
        shapes = None
    return frame, guards, shapes


def replayed_side_effects():
    """What the frame Dynamo is compiling changes in Python objects that
    existed before it ran (an attribute set on a module or on an argument,
    an item appended to a list it was given): Dynamo replays these in
    bytecode after the graph, so code that runs the region alone would
    skip them. Returns their sources ("L['self'].steps",
    "L['args'][1].layers"), [] where there are none or this torch does not
    say. Objects the frame created itself (a cache it builds and returns)
    and globals (transformers sets and resets a context variable in every
    forward) are not listed."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        from torch._dynamo.variables.base import AttributeMutationNew, ValueMutationNew
        se = InstructionTranslator.current_tx().output.side_effects
        found = set()
        for v in list(se.id_to_variable.values()):
            if isinstance(v.mutation_type, (AttributeMutationNew, ValueMutationNew)) or \
                    not se.is_modified(v):
                continue
            src = getattr(v, "source", None)
            name = getattr(src, "name", None)
            name = name() if callable(name) else name
            if not name or not name.startswith("L["):
                continue   # a global (a library's context variable set and reset)
            attrs = se.store_attr_mutations.get(v) or {}
            found |= {"%s.%s" % (name, a) for a in attrs} if attrs else {name}
        return sorted(found)
    except Exception:  # noqa: BLE001 - internals of another torch release
        return []


def _module_path(root, me):
    root = getattr(root, "_orig_mod", root)   # a torch.compile'd module: the model in it
    return next((name for name, m in root.named_modules(remove_duplicate=False) if m is me), None)


def _outermost_module(me):
    """The outermost module on the Python stack (the `self` of a frame
    that is running, a torch.compile'd module's model) holding `me`: the
    model a region inside a submodule (after a graph break) belongs to."""
    import sys
    import torch
    best = None
    # only the frames of module calls: reading a frame's f_locals leaves a
    # snapshot of its locals on the frame, which would keep a caller's
    # tensors alive as long as its frame runs (a module call's frame ends
    # with the call)
    calls = {getattr(torch.nn.Module, n).__code__ for n in ("_call_impl", "_wrapped_call_impl")
             if hasattr(torch.nn.Module, n)}
    f = sys._getframe(1)
    while f is not None:
        if f.f_code not in calls:
            f = f.f_back
            continue
        try:
            cand = f.f_locals.get("self")
        except Exception:  # noqa: BLE001 - a frame whose locals cannot be read
            cand = None
        if isinstance(cand, torch.nn.Module) and _module_path(cand, me) is not None:
            best = cand
        f = f.f_back
    return best if best is not None else me


def _weight_paths(gm, roots):
    """{placeholder name: (module path from the model's root, "param" or
    "buffer")} of the region's module weights. The frame's `self` is
    found among the modules of the model's root: roots[0], given by the
    caller, else the outermost module on the stack holding it (kept in
    roots[0] for the next region). A weight whose module is not under the
    root is left out (its name stays the frame's). {} where Dynamo does
    not say."""
    try:
        import torch
        from torch._dynamo.symbolic_convert import InstructionTranslator
        me = InstructionTranslator.current_tx().output.local_scope.get("self")
    except Exception:  # noqa: BLE001 - another torch: nothing known
        return {}
    if not isinstance(me, torch.nn.Module):
        return {}
    # roots[0] is held weakly: the backend outlives the calls it saw and
    # must keep no model (nor its weights) alive
    root = roots[0]() if roots[0] is not None else None
    base = _module_path(root, me) if root is not None else None
    if base is None and not roots[1]:   # not given: found (again) on the stack
        found = _outermost_module(me)
        if root is None or _module_path(found, getattr(root, "_orig_mod", root)) is not None:
            root = found
            roots[0] = weakref.ref(found)
        base = _module_path(root, me)
    if not base:
        # not under the root, or the frame is the root itself: Dynamo's
        # names already start there
        return {}
    out = {}
    for ps in placeholder_sources(gm):
        try:
            where, steps = parse_source(ps["source"] or "")
        except MagiError:
            continue
        ops = [op for op, _ in steps]
        if where != "self" or not ops or ops[-1] not in ("param", "buffer") or \
                any(op != "module" for op in ops[:-1]):
            continue
        path = ".".join(([base] if base else []) + [a for _, a in steps])
        out[ps["name"]] = (path, ops[-1])
    return out


def _name_weights(doc, paths):
    """Each module weight of the walked document named by its path from the
    model's root: the placeholder's target becomes the name Dynamo gives
    that weight reached from the root's `self`, its example records
    "module_path". Regions of one model then share a weight's slot only
    when they read the same weight."""
    from ..runtime.plan import buffer_name, dynamo_param_name
    for n in doc["graph"]["nodes"]:
        if n.get("op") != "placeholder" or n.get("name") not in paths:
            continue
        path, kind = paths[n["name"]]
        n["target"] = dynamo_param_name(path) if kind == "param" else buffer_name(path)
        ex = (n.get("meta") or {}).get("example_value")
        if isinstance(ex, dict):
            ex["module_path"] = path


class SideEffectsRefused(MagiError):
    """Raised by a backend made with refuse_side_effects=True, before it
    compiles, for a frame that changes objects it did not create
    (.sources: replayed_side_effects())."""

    def __init__(self, sources):
        self.sources = list(sources)
        super().__init__(-13, "the traced code changes %s, which Dynamo replays after the "
                         "graph (stored code runs the graph alone)" % ", ".join(self.sources),
                         "save_backend")


class SaveBackend:
    """A torch.compile backend that saves each region into a cache directory.

    cache_dir       the cache root (created if needed)
    model_tag       recorded in every region; model_idx counts regions from
                    start_idx in the order Dynamo hands them over
    compile_config  JSON-able dict carried verbatim
    compiler        optional backend (callable or registered name) that
                    produces the runnable callable; default: gm.forward
    strict          raise when saving fails instead of logging
    zstd_level      artifact compression level (0: the library default, see FORMAT.md §3)
    refuse_side_effects  raise SideEffectsRefused for a frame that changes
                    objects it did not create, before compiling it
                    (warm_start: such a region cannot run without Dynamo)
    root            the model (default: the outermost module on the stack
                    when a region is saved, the compiled model). Each module weight a
                    region reads is named by its path from the root
                    (placeholder target as Dynamo names it from the root's
                    `self`, "module_path" in its example), also in a region
                    that starts inside a submodule after a graph break
    inference       (store_code) compile every region's inference graph,
                    as under torch.no_grad(), whatever the grad mode of the
                    call Dynamo traced, and serve it with eager's autograd
                    (magi_aot.compile.grad: a backward recomputes the
                    forward from the region's graph); warm_start's choice,
                    so the stored code loads directly in any grad mode.
                    False: the code is compiled in the traced call's grad
                    mode (an autograd graph under grad)
    Thread-safe: model_idx allocation and the entries list are locked.
    """

    def __init__(self, cache_dir, model_tag, *, compile_config=None, compiler=None,
                 start_idx=0, strict=False, zstd_level=0, store_code=False,
                 inductor_options=None, refuse_side_effects=False, root=None, inference=False):
        self.cache_dir = os.fspath(cache_dir)
        self.model_tag = model_tag
        self.compile_config = compile_config
        self.compiler = compiler
        self.strict = strict
        self.zstd_level = zstd_level
        self.store_code = store_code
        self.inductor_options = inductor_options
        self.refuse_side_effects = refuse_side_effects
        self._root = [weakref.ref(root) if root is not None else None, root is not None]  # the model whose module paths name the weights; given?
        self.inference = inference
        # index records other processes stored for calls this one's code may
        # not serve (warm_start: another size, another configuration), published
        # under "variants" after this backend's regions
        self.keep_regions = []
        self.entries = []
        self.stored_code = {}   # cache key -> the compiled-code payload this backend stored
        self.record_outputs = False   # keep the last outputs of the returned callable
        self.last_outputs = None
        self._extra = {}        # model_idx -> fields added to its index record (annotate)
        self._next = start_idx
        self._lock = threading.Lock()
        for fn in ("magi_cache_open", "magi_cache_put", "magi_cache_region_key"):
            if not has(fn):
                raise MagiUnsupported(fn + "()")

    def _check_rebuildable(self, doc, model_idx):
        """strict: refuse a region a load cannot rebuild; else warn, naming
        each node (the region is still saved: its code may not need it)."""
        problems = rebuild_problems(doc)
        if not problems:
            return
        text = "region %s#%d cannot be fully rebuilt at load: %s" % (
            self.model_tag, model_idx, "; ".join(problems[:8]) + (" (+%d more)" % (len(problems) - 8)
                                                                  if len(problems) > 8 else ""))
        if self.strict:
            raise MagiError(-13, text)  # MAGI_ERR_UNSUPPORTED
        warnings.warn(text, UnrebuildableRegion, stacklevel=3)

    def save_region(self, gm, model_idx, code=None, weight_paths=None):
        """Walk, encode and publish one region. code: (payload builder,
        compile seconds) when compiled code is stored with it.
        weight_paths: {placeholder name: (path from the model's root,
        "param" | "buffer")} (default: read from the frame Dynamo is
        compiling)."""
        t0 = time.perf_counter()
        traced = _traced_files()
        doc = graph_to_doc(gm, model_tag=self.model_tag, model_idx=model_idx,
                           traced_files=traced, compile_config=self.compile_config)
        _name_weights(doc, weight_paths if weight_paths is not None else _weight_paths(gm, self._root))
        self._check_rebuildable(doc, model_idx)
        text = _dumps(doc)
        t1 = time.perf_counter()
        with CRegion.from_json_text(text) as r:
            # the CLI's key: the canonical structural fingerprint and the
            # compile_config, so ranks whose Dynamo numbered symbols
            # differently share one entry and two configs never do
            key = r.cache_key()
            fp = r.fingerprint() if has("magi_fingerprint_hex") else None
            n_nodes = r.struct.n_nodes
            payload = None
            if code is not None:
                payload = code[0](doc, fp, traced)
                data = self._with_variants(r, key, payload)
            else:
                data = r.encode(self.zstd_level)
        with _Cache(self.cache_dir) as c:
            res = c.put(key, data, replace=payload is not None)
        if payload is not None:
            with self._lock:
                self.stored_code[key] = payload
        t2 = time.perf_counter()
        return SavedRegion(model_tag=self.model_tag, model_idx=model_idx, key=key,
                           fingerprint=fp, nodes=n_nodes, bytes=len(data),
                           published=bool(res.published), walk_seconds=t1 - t0,
                           save_seconds=t2 - t0, code_bytes=len(payload) if payload else 0,
                           compile_seconds=code[1] if code else None,
                           sources=placeholder_sources(gm))

    def _with_variants(self, creg, key, payload):
        """Artifact bytes holding `payload` plus the stored variants of the
        entry already under `key` whose environment key differs."""
        mine = unpack(payload)[0]["key"]
        keep = []
        with _Cache(self.cache_dir) as c:
            old = c.get_or_none(key)
        if old is not None:
            try:
                for raw in read_opaque_sections(old):
                    if unpack(raw)[0].get("key") != mine:
                        keep.append(raw)
            except MagiError as e:  # a bad old entry: replaced, not merged
                log.warning("magi_aot: entry %s: old compiled code dropped: %s", key, e)
        sections = [(SECTION_COMPILED, payload)] + [(SECTION_COMPILED, k)
                                                     for k in keep[:MAX_VARIANTS - 1]]
        return creg.encode_with(sections, self.zstd_level)

    def _compile(self, gm, example_inputs):
        t = time.perf_counter()
        import contextlib
        import torch
        grad = torch.is_grad_enabled() and not self.inference
        if any(getattr(x, "is_cuda", False) for x in example_inputs):
            use_triton_cache(self.cache_dir)
        with torch.no_grad() if self.inference else contextlib.nullcontext():
            fn, blobs = compile_region(inference_copy(gm) if self.inference else gm,
                                       example_inputs, options=self.inductor_options)
        if self.inference:
            fn = with_autograd(fn, lambda: gm, "region %s" % self.model_tag)
        dt = time.perf_counter() - t
        sources = placeholder_sources(gm)

        def build(doc, fp, traced):
            key = environment_key(region_device(doc), fp, "as_saved")
            return pack(make_header(key, traced, sources, self.inductor_options, grad), blobs)
        return fn, (build, dt)

    def _publish_index(self):
        with self._lock:
            ents = [e.as_dict() for e in self.entries if not e.error]
            extra = {k: dict(v) for k, v in self._extra.items()}
        # a recompile of a frame (Dynamo's guards failed: a new size, a
        # changed attribute) replaces that frame's earlier regions
        latest = {}
        for e in ents:
            f = e.get("frame") or [None, 0]
            if f[0] is None or f[1] >= latest.get(f[0], -1):
                latest[f[0]] = f[1]
        ents = [e for e in ents if (e.get("frame") or [None, 0])[0] is None
                or (e.get("frame") or [None, 0])[1] == latest[e["frame"][0]]]
        regions = []
        for e in sorted(ents, key=lambda e: e["model_idx"]):
            r = {"model_idx": e["model_idx"], "key": e["key"], "sources": e["sources"],
                 "frame": e.get("frame"), "guards": e.get("guards"), "shapes": e.get("shapes")}
            r.update(extra.get(e["model_idx"], {}))
            regions.append(r)
        doc = {"model_tag": self.model_tag, "regions": regions}
        mine = {r["key"] for r in regions}
        kept = [r for r in self.keep_regions if r.get("key") not in mine]
        if kept:
            # after this process's region, in the order a loading process tries them
            doc["variants"] = kept[:MAX_INDEX_VARIANTS]
        with _Cache(self.cache_dir) as c:
            c.put(index_key(self.model_tag), json.dumps(doc).encode(), replace=True)

    def annotate(self, model_idx, **fields):
        """Add fields to a region's record in the published index (warm_start
        adds the return value's structure and the call's argument kinds)
        and publish it again."""
        with self._lock:
            self._extra.setdefault(model_idx, {}).update(fields)
        self._publish_index()

    def _recording(self, fn):
        def run(*a):
            out = fn(*a)
            if self.record_outputs:
                self.last_outputs = out
            return out
        return run

    def __call__(self, gm, example_inputs):
        if self.refuse_side_effects:
            effects = replayed_side_effects()
            if effects:
                raise SideEffectsRefused(effects)
        with self._lock:
            idx = self._next
            self._next += 1
        fn = code = None
        if self.store_code:
            # compile first: a region whose code cannot be built is not
            # published with a stale or missing variant
            fn, code = self._compile(gm, example_inputs)
            fn = self._recording(fn)
        frame, guards, shapes = _frame_facts(gm)
        try:
            ent = self.save_region(gm, idx, code)
            ent.frame, ent.guards, ent.shapes = frame, guards, shapes
        except Exception as e:  # noqa: BLE001 - never break the model
            if self.strict:
                raise
            log.warning("magi_aot: region %s#%d not saved: %s", self.model_tag, idx, e)
            ent = SavedRegion(model_tag=self.model_tag, model_idx=idx, error=str(e))
        with self._lock:
            self.entries.append(ent)
        if self.store_code:
            try:
                if not self.record_outputs:   # else the caller annotates, then publishes
                    self._publish_index()
            except Exception as e:  # noqa: BLE001
                if self.strict:
                    raise
                log.warning("magi_aot: index of %s not published: %s", self.model_tag, e)
            return fn
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
