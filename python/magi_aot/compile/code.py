"""Compiled code of a region: compile it and store it, load it back runnable.

The save side (`compile_region`) compiles a region Dynamo handed over with
Inductor's standalone compile (`torch._inductor.standalone_compile`,
`dynamic_shapes="from_graph"`), serialises the result
(`CompiledArtifact.save(format="binary")`) and packs it with the key it
depends on into one payload (payload.py: format and digests; keys.py: the
environment key) that the C library stores as an opaque COMPILED section.

Blobs: "standalone" (the binary CompiledArtifact) and, on CPU, "so/REL"
for every C++ kernel library Inductor built while compiling the region
(Inductor's cache entry holds the generated Python module, not the shared
objects its C++ kernels compile to; without them a fresh process would
run the C++ compiler again). On GPU the Triton kernels are already inside
the standalone artifact; what is stored beside it is "tune/REL", the
autotune choice of each Triton kernel (.best_config), made by running the
region once at store time (_tune_once), so a warm process neither
benchmarks configs again nor picks other ones. "direct.json" (always): whether the compiled
graph runs without AOTAutograd's runtime wrappers and why not, the inputs
to align, the CPU vector ISA, torch's and Triton's source-hash keys with
a fingerprint of the files they hash (keys.py: reused while the module
loads when those files are unchanged); where it does, "direct.py" (Inductor's
generated module, header imports lightened) and "direct.pyc" (its code
object, marshal of the Python in the key): the load runs that module
(load_direct) and falls back to the standalone artifact.

The load side: `choose` picks the payload whose key equals the running one
and whose traced source files still have their recorded SHA-256 (read
once, by one call per load); `load_region_code` serves it, given that
verdict, or compiles the region from its graph and rebuilt FakeTensor
inputs (or, when a source changed, says the region is stale: its graph may
no longer be what Dynamo would trace), and the report names the field or
file. Stored code is loaded only from a writer trust.py accepts.
"""
import atexit
import contextlib
import functools
import hashlib
import inspect
import json
import os
import shutil
import stat
import sys
import tempfile
import time

from .. import config
from .._lib import MagiError
from . import keys
from .payload import changed_files, header_of, read_regular, unpack
from .trust import TRUST_ENV, UNKNOWN_ORIGIN, will_load
from ..region import fingerprint as fingerprint_of
from .grad import inference_copy
from .progress import COMPILE_DIR_PREFIX

__all__ = ["compile_region", "load_region_code", "choose", "compile_from_graph"]


def _err(msg, code=-4):
    return MagiError(code, "compiled section: " + msg, "magi_aot.compile.code")


# ------------------------------------------------------------------ Triton's cache
TRITON_DIR = "triton"   # under the magi cache root, beside v1/


def _private_dir(path):
    """True when path is (or was just made) a real directory owned by this
    user that nobody else can write: never a symlink, never group/other
    writable (it will hold shared objects that get loaded and run)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def use_triton_cache(cache_dir):
    """Point Triton's own cache (TRITON_CACHE_DIR) at a private directory
    inside the magi cache, unless the process already chose one.

    Why: a kernel Inductor cannot launch through its static launcher runs
    through a launcher module that Triton builds with the C compiler the
    first time a process calls it (0.2 s each on one H200 host) and keeps
    in Triton's cache. Inductor points that cache into its own cache
    directory, which differs between processes that keep separate Inductor
    caches, so every warm process rebuilt them. Kept beside the artifacts,
    the launchers built by the process that stored the code (it runs the
    code once) serve every later process that shares the magi cache; the
    cubins Inductor restores from the artifact land there too. Triton keys
    each file by the SHA-256 of its source and the platform, so nothing
    built for another environment is ever picked up.

    Returns the directory in use, or None when the magi cache directory is
    not private to this user (a group-shared cache): then Triton keeps its
    default, as a directory others can write must not hold code we load."""
    cur = config.TRITON_CACHE_DIR.raw()
    if cur:
        return cur
    root = os.path.join(os.fspath(cache_dir), TRITON_DIR)
    if not (_private_dir(os.fspath(cache_dir)) and _private_dir(root)):
        return None
    config.TRITON_CACHE_DIR.set(root)
    return root


# ------------------------------------------------------------------ save side
def _files_as_blobs(root, suffix, prefix):
    """(prefix + "/" + REL, bytes) for every file under root whose name ends
    with suffix, sorted."""
    blobs = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(suffix):
                p = os.path.join(d, f)
                with open(p, "rb") as fh:
                    blobs.append((prefix + "/" + os.path.relpath(p, root), fh.read()))
    return sorted(blobs)


def _so_blobs(root):
    """("so/REL", bytes) for every C++ kernel library Inductor built under root."""
    return _files_as_blobs(root, ".so", "so")


_PROBES: dict = {}   # this process's CPU ISA probe libraries: path under a cache dir -> bytes


def _isa_probes(root):
    """Put Inductor's CPU ISA probe libraries into the cache directory `root`
    of this compile. A process loading Inductor code probes which vector
    ISAs the CPU runs by building a small library per ISA, unless it is
    already in the cache directory; the process that compiles probes only
    once, so a region it compiles after its first one would come without
    them and every fresh process loading it would build them (seconds
    each). A probe is a library whose C++ source beside it is one of the
    probe programs (the `*_code` texts of torch's VecISA classes); those
    met in an earlier compile of this process are copied. Best effort: a
    torch without these internals stores what its compile left."""
    try:
        from torch._inductor import cpu_vec_isa as cvi
        codes = set()
        for cls in [cvi.VecISA] + list(cvi.VecISA.__subclasses__()) + [
                type(i) for i in getattr(cvi, "supported_vec_isa_list", ())]:
            for klass in cls.__mro__:
                codes |= {v for k, v in vars(klass).items()
                          if k.endswith("_code") and isinstance(v, str)}
    except Exception:  # noqa: BLE001 - internals of another torch release
        return
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".so"):
                continue
            cpp = os.path.join(d, f[:-3] + ".cpp")
            src = read_regular(cpp, 1 << 20)
            if src is not None and src.decode("utf-8", "replace") in codes:
                with open(os.path.join(d, f), "rb") as fh:
                    _PROBES[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    for rel, data in _PROBES.items():
        dst = os.path.join(root, rel)
        if not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as fh:
                fh.write(data)


def _forget_loaded_kernels():
    """Drop Inductor's in-process table of C++ kernel libraries it already
    loaded: a kernel this process built for an earlier region (a recompile
    of the same model for a new size) would otherwise be reused from there
    and its .so never land in this region's directory, so a fresh process
    loading the region would build it again."""
    try:
        from torch._inductor import codecache
    except ImportError:
        return
    for name in ("CppCodeCache", "CppPythonBindingsCodeCache", "CppWrapperCodeCache"):
        cache = getattr(getattr(codecache, name, None), "cache", None)
        if isinstance(cache, dict):
            cache.clear()


# Functions a Dynamo graph records as calls whose result, and whose effect
# while the graph is traced, depend on their arguments alone (constants in
# the graph, which the cache key hashes), but that Inductor's graph cache
# does not know: the standalone artifact is a cache entry, so a region
# holding one could not be saved. torchtitan's attention records both
# (`sdpa_kernel` around SDPA with the backends named in its config).
CACHEABLE_RECORDED_FUNCTIONS = ("torch.nn.attention._backend_from_string",
                                "torch.nn.attention._sdpa_kernel")


def _cacheable_functions():
    """Inductor settings while a region compiles: the graph cache takes
    CACHEABLE_RECORDED_FUNCTIONS, and graphs holding `control_deps`, the
    ordering operator the launch-order pass inserts (Inductor refuses
    higher-order operators it does not know to be cacheable; this one only
    orders, and the cache key hashes its subgraphs with the graph). Each is
    marked with this torch's version, which the cache key hashes."""
    import torch
    import torch._inductor.config as config
    names = list(CACHEABLE_RECORDED_FUNCTIONS)
    try:
        from torch._inductor.fx_passes.control_dependencies import control_deps
        names.append("%s.%s" % (control_deps.__module__, control_deps.__name__))
    except ImportError:
        pass
    marked = dict(getattr(config, "unsafe_marked_cacheable_functions", None) or {})
    for name in names:
        marked.setdefault(name, torch.__version__)
    return config.patch(unsafe_marked_cacheable_functions=marked)


def compile_region(gm, example_inputs, *, options=None):
    """Compile a Dynamo region with Inductor's standalone compile and return
    (callable, [(blob name, bytes)]). Inductor's files go to a private cache
    directory for the call, so the C++ kernel libraries of this region are
    exactly the .so files found there."""
    import torch
    from torch._inductor import standalone_compile
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
    tmp = tempfile.mkdtemp(prefix=COMPILE_DIR_PREFIX)
    # the grad mode the graph is compiled under (an autograd graph when on),
    # read now: tracing a Dynamo graph runs its _set_grad_enabled nodes (a
    # torch.no_grad() block in forward ends by turning grad back on), so
    # the mode after the compile says nothing about the graph compiled
    grad = torch.is_grad_enabled()
    # Removed at exit, not now: the returned callable may still open files
    # there (kernels loaded on first use).
    atexit.register(shutil.rmtree, tmp, True)
    with temporary_cache_dir(tmp), _config(cpp_cache_precompile_headers=False), \
            _cacheable_functions(), _capture_graphs() as seen:
        _forget_loaded_kernels()
        with torch.set_grad_enabled(grad):
            art = standalone_compile(gm, example_inputs, dynamic_shapes="from_graph",
                                     options=dict(options or {}))
        path = os.path.join(tmp, "region.standalone")
        art.save(path=path, format="binary")
        with open(path, "rb") as f:
            blob = f.read()
        os.unlink(path)
        _isa_probes(tmp)
        refusal = _direct_refusal_of(seen, grad)
        with torch.set_grad_enabled(grad):
            tuned = _tune_once(art, gm, example_inputs, seen, refusal)
        blobs = [("standalone", blob)] + _so_blobs(tmp) + _tune_blobs(tmp) + \
            _direct_blobs(seen, refusal, tuned)
    return art, blobs


TUNE_MARKER = "async_compile.triton("   # a generated module with Triton kernels holds this


def _tune_once(art, gm, example_inputs, seen, refusal):
    """Run a GPU region once, here, with the inputs Dynamo handed over, so
    that Inductor autotunes its Triton kernels now and writes each choice
    (a .best_config file) into this compile's cache directory, where
    _tune_blobs finds them. A warm process then launches the configs chosen
    here instead of benchmarking again at its first call, and so computes
    what this process computes (a kernel's config decides its reduction
    order). Returns None when it ran, else why not: only an inference
    region of Triton kernels with no collective (a collective run here,
    outside the step, would wait for peers that are not there) and no
    mutated input is run. refusal: _direct_refusal_of(seen)."""
    import torch
    src = getattr(seen[0][0], "source_code", "") if len(seen) == 1 else ""
    if TUNE_MARKER not in (src or ""):
        return "no Triton kernels"
    if torch.is_grad_enabled():
        return "compiled with grad enabled"
    for n in gm.graph.nodes:
        if n.op == "call_function" and any(
                k in str(n.target) for k in ("c10d", "magi.", "magi::", "distributed")):
            return "the region holds a collective (%s)" % n.name
    if refusal is not None:
        return "not directly loadable: %s" % refusal
    args = _concrete(example_inputs)
    if isinstance(args, str):
        return args
    try:
        art(*args)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - tuning is an optimisation: the load still works
        return "the tuning run failed: %s: %s" % (type(e).__name__, str(e)[:200])
    return None


def _concrete(example_inputs):
    """The inputs with each symbolic size replaced by its hint, or why
    that cannot be done. The run must not touch Dynamo's shape
    environment: an int() of a SymInt here would specialise the size in
    the guards of the graph being compiled."""
    import torch
    from torch._subclasses.fake_tensor import is_fake
    out = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt):
            hint = getattr(x.node, "hint", None)
            if not isinstance(hint, int):
                return "input %d is a size with no hint" % i
            out.append(hint)
        elif isinstance(x, (torch.SymFloat, torch.SymBool)):
            return "input %d is a symbolic scalar" % i
        elif isinstance(x, torch.Tensor) and is_fake(x):
            return "input %d is a fake tensor" % i
        else:
            out.append(x)
    return out


def _tune_blobs(root):
    """("tune/REL", bytes) for every autotune choice (.best_config) Inductor
    wrote under root."""
    return _files_as_blobs(root, ".best_config", "tune")


# ------------------------------------------------------------------ the direct module
DIRECT_VERSION = 1
DIRECT_ENV = config.DIRECT.name   # "0": load stored code with CompiledArtifact.load only


@contextlib.contextmanager
def _capture_graphs():
    """The output graphs Inductor builds inside the block, each with
    AOTAutograd's runtime metadata of the graph it compiled
    ([(CompiledFxGraph, ViewAndMutationMeta or None)])."""
    seen = []
    try:
        from torch._inductor import output_code
        cls = output_code.CompiledFxGraph
    except (ImportError, AttributeError):
        yield seen
        return
    orig = cls.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        meta = None
        try:
            from torch._guards import TracingContext
            meta = getattr(TracingContext.try_get(), "fw_metadata", None)
        except Exception:  # noqa: BLE001 - internals of another torch release
            pass
        seen.append((self, meta))
    cls.__init__ = init
    try:
        yield seen
    finally:
        cls.__init__ = orig


def _direct_refusal(seen, grad):
    """None when the one compiled graph can run without AOTAutograd's
    runtime wrappers (its call(args) returns exactly the region's outputs),
    else why not. grad: whether it was compiled with grad enabled."""
    if grad:
        return "compiled with grad enabled (an autograd graph)"
    if len(seen) != 1:
        return "Inductor built %d output graphs, not one" % len(seen)
    g, meta = seen[0]
    if meta is None:
        return "no AOTAutograd metadata for the graph"
    if not isinstance(getattr(g, "source_code", None), str) or not g.source_code:
        return "no generated module source"
    for what in ("constants", "torchbind_constants", "opaque_value_type_classes",
                 "mutated_inputs", "partition_maps"):
        if getattr(g, what, None):
            return "the compiled graph has %s" % what
    if getattr(g, "cudagraph_info", None) is not None or getattr(g, "_boxed_call", True) is not True:
        return "the compiled graph runs through CUDA graphs or an unboxed call"
    for i, inp in enumerate(meta.input_info):
        if any(getattr(inp, f, False) for f in ("mutates_data", "mutates_metadata",
                                                "mutates_storage_metadata",
                                                "mutation_inductor_storage_resize")):
            return "input %d is mutated" % i
    for i, out in enumerate(meta.output_info):
        kind = getattr(out.output_type, "name", str(out.output_type))
        if kind != "non_alias" or getattr(out, "requires_grad", False):
            return "output %d is %s (AOTAutograd rebuilds it at run time)" % (i, kind)
    if getattr(meta, "num_intermediate_bases", 0) or getattr(meta, "tokens", None) or \
            getattr(meta, "num_graphsafe_rng_states", 0):
        return "intermediate bases, effect tokens or RNG states"
    for m in list(getattr(meta, "subclass_inp_meta", ())) + \
            list(getattr(meta, "subclass_fw_graph_out_meta", ())):
        if not isinstance(m, int) and type(m).__name__ != "PlainTensorMeta":
            return "a tensor subclass among the inputs or outputs"
    return None


def _direct_refusal_of(seen, grad):
    """_direct_refusal, with metadata this torch release does not let us
    read counted as a refusal."""
    try:
        return _direct_refusal(seen, grad)
    except Exception as e:  # noqa: BLE001 - internals of another torch release
        return "metadata not readable: %s" % e


def _direct_blobs(seen, why, tuned=None):
    """"direct.json" (always: eligible, or why not: `why`, from
    _direct_refusal_of; tuned: None when the Triton kernels were tuned at
    store time, else why not) and, when eligible, "direct.py" (Inductor's
    generated module) and "direct.pyc" (its code object, marshalled for
    this Python)."""
    import marshal
    meta = {"version": DIRECT_VERSION, "eligible": why is None, "why": why,
            "untuned": tuned}
    if why is not None:
        return [("direct.json", json.dumps(meta).encode())]
    g = seen[0][0]
    src, meta["lightened"] = _lighter_imports(g.source_code)
    meta["inputs_to_check"] = [int(i) for i in (getattr(g, "inputs_to_check", None) or ())]
    meta["seeds"] = keys.record()
    meta["python"] = sys.version
    if "cpu" in (getattr(g, "device_types", None) or ()):
        try:
            meta["isa_probes"] = _probe_answers()
            meta["vec_isa"] = meta["isa_probes"]["isa"]
        except Exception:  # noqa: BLE001 - internals of another torch release
            pass
    code = compile(src, "<magi region module>", "exec")
    return [("direct.json", json.dumps(meta).encode()), ("direct.py", src.encode()),
            ("direct.pyc", marshal.dumps(code))]


_EXTERN_IMPORT = "from torch._inductor.select_algorithm import extern_kernels"
_ALIGN_IMPORT = "from torch._inductor.codegen.memory_planning import _align as align"


def _lighter_imports(src):
    """(source, [what changed]): the generated module's header imports
    Inductor's autotuner (select_algorithm, and through it the lowerings)
    for its `extern_kernels` namespace and the memory planner for `align`;
    seconds in a fresh process. Where every `extern_kernels.NAME` the
    module calls is, in this (the compiling) process, the very function
    torch.NAME, the import becomes a namespace of those functions; the
    `align` import goes where the module never calls align."""
    import re
    import torch
    lines = src.split("\n")
    done = []
    if _EXTERN_IMPORT in lines:
        names = sorted(set(re.findall(r"\bextern_kernels\.(\w+)", src)))
        try:
            from torch._inductor.select_algorithm import extern_kernels
            same = all(getattr(extern_kernels, n, None) is getattr(torch, n, object())
                       for n in names)
        except Exception:  # noqa: BLE001 - internals of another torch release
            same = False
        if same:
            lines[lines.index(_EXTERN_IMPORT)] = (
                "import types as _magi_types; extern_kernels = _magi_types.SimpleNamespace(%s)"
                % ", ".join("%s=torch.%s" % (n, n) for n in names))
            done.append("extern_kernels: " + (", ".join(names) or "none used"))
    if _ALIGN_IMPORT in lines and not re.search(r"\balign\(", src):
        lines[lines.index(_ALIGN_IMPORT)] = "pass"
        done.append("align (unused)")
    return "\n".join(lines), done


def _probe_key(isa, code):
    """A probe's name: the ISA class and the program. Not the build flags:
    Inductor adds a flag to an ISA instance while it probes a finer
    feature and may keep it, so they depend on what this process asked
    before; the finer features have programs of their own."""
    return "%s|%s" % (type(isa).__name__, hashlib.sha256(code.encode()).hexdigest()[:16])


def _isa_module():
    from torch._inductor import cpu_vec_isa
    classes = [cpu_vec_isa.VecISA] + [type(i) for i in cpu_vec_isa.supported_vec_isa_list]

    def forget():
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
        for cls in classes:
            for f in vars(cls).values():
                if callable(getattr(f, "cache_clear", None)):
                    f.cache_clear()
    return cpu_vec_isa, forget


@contextlib.contextmanager
def _attr(obj, name, value):
    """obj.name is value while the block runs, and what it was afterwards."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@functools.lru_cache(maxsize=None)
def _probe_answers():
    """{"isa": the ISA picked, "cpu": fingerprint, "answers": {probe key:
    bool}}: every ISA probe (VecISA.check_build: build a small program with
    one ISA's flags, load it) Inductor runs to pick this CPU's vector ISA,
    asked again here with Inductor's ISA choices forgotten, and its answer.
    A process loading the module answers the same probes from this record
    instead of building and loading them (a compiler run and a child Python
    each). Asked once per process: the CPU does not change. Callers must
    not modify the result."""
    cpu_vec_isa, forget = _isa_module()
    answers = {}
    orig = cpu_vec_isa.VecISA.check_build

    def recording(isa, code):
        ok = orig(isa, code)
        answers[_probe_key(isa, code)] = bool(ok)
        return ok
    forget()
    with _attr(cpu_vec_isa.VecISA, "check_build", recording):
        isa = str(cpu_vec_isa.pick_vec_isa())
    return {"isa": isa, "cpu": keys.cpu_fingerprint(), "answers": answers}


@contextlib.contextmanager
def _known_vec_isa(recorded, probes=None):
    """While the stored module loads: Inductor picks the CPU vector ISA
    for its kernel libraries' build flags (their paths hash them) by
    building a probe library per ISA and loading each in a child Python
    (a subprocess per probe, each time a process starts). The libraries
    are already built, so the probes are not run when they can be
    answered without running them:
    - probes (recorded at store time, _probe_answers) on a CPU of the same
      fingerprint: each probe is answered from the record; one missing
      from it runs as usual;
    - otherwise, when the CPU's flags alone (/proc/cpuinfo, torch.cpu's
      feature checks) pick the ISA the compiling process picked:
      vec_isa_ok for the base probes, and no child Python for the finer
      ones (bf16, VNNI), which still check the CPU's feature.
    Inductor's ISA choices are forgotten afterwards, so a later compile in
    this process probes as usual. Otherwise the probes run."""
    if not recorded:
        yield
        return
    try:
        cpu_vec_isa, forget = _isa_module()
        answers = (probes or {}).get("answers")
        same_cpu = bool(answers) and probes.get("cpu") is not None and probes["cpu"] == keys.cpu_fingerprint()
        check = cpu_vec_isa.VecISA.check_build
        if same_cpu:
            def answered(isa, code):
                got = answers.get(_probe_key(isa, code))
                return check(isa, code) if got is None else got
            shortcut = _attr(cpu_vec_isa.VecISA, "check_build", answered)
        elif hasattr(cpu_vec_isa.VecISA, "_probe_load"):
            shortcut = _attr(cpu_vec_isa.VecISA, "_probe_load", lambda self, path: True)
        else:
            shortcut = contextlib.nullcontext()
        with shortcut, (contextlib.nullcontext() if same_cpu else _config(**{"cpp.vec_isa_ok": True})):
            ok = str(cpu_vec_isa.pick_vec_isa()) == recorded
        if not ok:
            forget()
    except Exception:  # noqa: BLE001 - internals of another torch release
        yield
        return
    if not ok:
        yield
        return
    try:
        with _config(**{"cpp.vec_isa_ok": True}):
            yield
    finally:
        forget()


class DirectCall:
    """Inductor's generated call(args) for a region whose compiled graph
    needs no AOTAutograd runtime wrapper (checked when it was stored): the
    inputs Inductor asked to have aligned are copied when they are not, and
    an inference graph runs with grad off, as AOTAutograd runs it."""

    def __init__(self, call, inputs_to_check):
        self._call = call
        self._check = tuple(inputs_to_check)

    def __call__(self, *args):
        import torch
        args = list(args)
        for i in self._check:
            a = args[i]
            if isinstance(a, torch.Tensor) and a.data_ptr() % 16:
                from torch._inductor.utils import clone_preserve_strides
                args[i] = clone_preserve_strides(a)
        if torch.is_grad_enabled():
            with torch.no_grad():
                return list(self._call(args))
        return list(self._call(args))


def load_direct(blobs, timings):
    """(callable, None) from the stored generated module, or (None, why not)
    when the payload has none or it does not load (the caller then loads
    the standalone artifact). The kernel libraries are put in place first
    (CPU); Triton kernels compile from the module through Triton's cache."""
    import marshal
    import types
    if not config.DIRECT.get():
        return None, "%s=0" % DIRECT_ENV
    raw = blobs.get("direct.json")
    if raw is None:
        return None, "no directly loadable module stored"
    try:
        meta = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        return None, "direct.json is not JSON: %s" % e
    if not isinstance(meta, dict) or meta.get("version") != DIRECT_VERSION:
        return None, "direct module of another format version"
    if not meta.get("eligible"):
        return None, "not stored directly loadable: %s" % meta.get("why")
    if "direct.py" not in blobs:
        return None, "direct.py missing"
    t = time.perf_counter()
    try:
        timings["restore_so_files"] = _restore_so(blobs)
        code = None
        if meta.get("python") == sys.version and "direct.pyc" in blobs:
            try:
                code = marshal.loads(blobs["direct.pyc"])
            except (ValueError, EOFError, TypeError):
                code = None
        if not isinstance(code, types.CodeType):
            code = compile(blobs["direct.py"].decode("utf-8"), "<magi region module>", "exec")
        mod = types.ModuleType("magi_aot_region")
        seeds = {}
        with _load_config(), _known_vec_isa(meta.get("vec_isa"), meta.get("isa_probes")), keys.seeded(meta.get("seeds"), seeds):
            exec(code, mod.__dict__)  # noqa: S102 - trusted stored code (module doc)
        timings["source_keys"] = seeds
        call = mod.__dict__["call"]
    except Exception as e:  # noqa: BLE001 - any failure: the standalone artifact serves
        return None, "direct module did not load: %s: %s" % (type(e).__name__, e)
    timings["direct_load_s"] = time.perf_counter() - t
    return DirectCall(call, meta.get("inputs_to_check") or ()), None


# ------------------------------------------------------------------ load side
def _restore_so(blobs):
    """Put the region's C++ kernel libraries ("so/REL") and its Triton
    kernels' autotune choices ("tune/REL") where Inductor looks for them
    (its cache directory, same relative path). A file already there is kept
    only when it is a regular file holding exactly the verified bytes;
    anything else (another file of the same size included) is replaced
    atomically by them."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    root = os.path.realpath(cache_dir())
    n = 0
    for name, data in blobs.items():
        kind, _, rel = name.partition("/")
        if kind not in ("so", "tune") or not rel:
            continue
        dst = os.path.realpath(os.path.join(root, rel))
        if os.path.isabs(rel) or not dst.startswith(root + os.sep):
            raise _err("kernel library path '%s' leaves the cache directory" % rel)
        if read_regular(dst, len(data)) == data:
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dst), prefix=".magi-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o755 if kind == "so" else 0o644)
            os.replace(tmp, dst)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        n += 1
    return n


@contextlib.contextmanager
def _load_config():
    """Inductor settings while stored code is loaded:
    - compile_threads=1: no compile-worker pool (loading compiles nothing,
      and starting the pool costs seconds in a fresh process);
    - cpp_cache_precompile_headers=False, as when the code was compiled
      (compile_region): the kernel libraries' paths depend on it, and with
      it on Inductor runs the preprocessor over its prefix header to find
      the precompiled header, even when the libraries are in place."""
    with _config(compile_threads=1, cpp_cache_precompile_headers=False):
        yield


def _config(**kw):
    """inductor config.patch of the settings this torch release has."""
    from torch._inductor import config

    def has(name):
        obj = config
        for part in name.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return config.patch({k: v for k, v in kw.items() if has(k)})


def load_standalone(blobs, timings):
    """The runnable callable of a verified payload's blobs."""
    from torch._inductor.standalone_compile import CompiledArtifact
    t = time.perf_counter()
    timings["restore_so_files"] = _restore_so(blobs)
    fd, path = tempfile.mkstemp(prefix="magi-code-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blobs["standalone"])
        timings["write_s"] = time.perf_counter() - t
        t = time.perf_counter()
        with _load_config():
            art = CompiledArtifact.load(path=path, format="binary")
        timings["standalone_load_s"] = time.perf_counter() - t
    finally:
        os.unlink(path)
    return art


def compile_from_graph(region, timings, grad_enabled=False, allow_targets=()):
    """Compile a region from its graph and rebuilt fake inputs (no Dynamo),
    for the grad mode the stored code was compiled under (an inference
    graph when grad was off, as under torch.no_grad()). allow_targets:
    opt-ins past the loader's allow-list (magi_aot.fx.targets)."""
    import torch
    from torch._inductor import standalone_compile
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    t = time.perf_counter()
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    args = region.fake_inputs(fake_mode)
    gm = region.graph_module(allow_targets=allow_targets)
    if not grad_enabled:   # the inference graph, as stored (grad.inference_copy)
        gm = inference_copy(gm)
    with torch.set_grad_enabled(grad_enabled):
        if _takes(standalone_compile, "fake_mode"):
            art = standalone_compile(gm, list(args), dynamic_shapes="from_example_inputs",
                                     fake_mode=fake_mode)
        else:  # a release without the fake_mode argument (2.11)
            art = _compile_in_mode(standalone_compile, gm, list(args), fake_mode)
    timings["compile_s"] = time.perf_counter() - t
    return art


def _takes(fn, name):
    """Whether `fn` takes the keyword argument `name`: named in its
    signature, or a **kwargs it passes on (a wrapper); True where the
    signature cannot be read (the call then says for itself)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _compile_in_mode(standalone_compile, gm, args, fake_mode):
    """standalone_compile over our FakeTensor inputs where it takes no
    fake_mode. With "from_example_inputs" such a release makes a fresh
    ShapeEnv and meets the inputs' symbols, which it does not know ("vr
    must not be None for symbol s13"); with "from_graph" it adopts the mode
    of the FakeTensors in the graph's output metadata. So: propagate the
    fake inputs through the graph, record each value as Dynamo would
    (meta["example_value"]), and compile "from_graph"."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    # as Dynamo runs ops: through the Python dispatcher, whose
    # decompositions keep sizes symbolic (without it, CPU matmul asks for
    # concrete sizes and specialises the sequence length)
    with enable_python_dispatcher():
        FakeTensorProp(gm, mode=fake_mode).propagate_dont_convert_inputs(*args)
    for n in gm.graph.nodes:
        if "val" in n.meta and "example_value" not in n.meta:
            n.meta["example_value"] = n.meta["val"]
    return standalone_compile(gm, args, dynamic_shapes="from_graph")


def rewritten(region):
    """Did the load's transport rewrite change the graph (either way)?"""
    return bool(region.n_rewritten or getattr(region, "n_restored", 0))


def transport_used(region):
    """The key's transport field for a loaded region: "as_saved" when the
    load changed no gather, else the transport whose rewrite changed it."""
    return region.transport if rewritten(region) else "as_saved"


def choose(region, payloads, transport_used, check_sources=True):
    """Pick the stored variant matching the running key. Returns
    (header, blobs, reason): header None when nothing matches, reason says
    which key field or source file differed. check_sources: compare the
    traced files' digests with the files now; False for payloads that will
    not be loaded (untrusted: hashing the files a stranger's header names
    would tell them, by what this process does next, whether a file of
    this user's holds what they guessed)."""
    fp = fingerprint_of(region.doc) if rewritten(region) else region.fingerprint
    device = keys.region_device(region.doc)
    running = keys.environment_key(device, fp, transport_used)
    reasons = []
    for raw in payloads:
        header, blobs = unpack(raw)
        stored = header.get("key") or {}
        diff = keys.key_differences(stored, running)
        if diff:
            reasons.append("; ".join("key '%s' differs: stored %r, running %r" % d for d in diff))
            continue
        changed = changed_files(header.get("traced_files") or {}) if check_sources else None
        if changed:
            return None, None, "source changed since the code was stored: %s" % ", ".join(changed)
        return header, blobs, None
    if not payloads:
        return None, None, "no compiled code stored"
    return None, None, " | ".join(reasons)


def load_region_code(region, payloads, *, transport_used="as_saved", allow_compile=True,
                     untrusted=UNKNOWN_ORIGIN, trust_compiled=None, allow_targets=(),
                     chosen=None):
    """A runnable callable for a loaded region plus a report.

    region          magi_aot.Region (as rewritten at load)
    payloads        the COMPILED sections' bytes (verified by the library)
    transport_used  "as_saved" when the load rewrote nothing, else the
                    transport whose rewrite changed the graph
    untrusted       None when only this user can have written the payloads
                    (warm_start checks the cache entry's owner and mode),
                    else why not (default: nobody said). Untrusted stored
                    code is not loaded (it is code) unless trust_compiled
                    (or MAGI_AOT_TRUST_COMPILED=1): the region is compiled
                    from its graph instead and the reason says why
    allow_targets   opt-ins past the loader's allow-list of graph targets
    chosen          choose()'s verdict when the caller already has it (with
                    check_sources=will_load(untrusted, trust_compiled))
    Returns (callable, report); report = {"served": "stored" | "compiled",
    "reason": None | why the stored code was not used, "code_path":
    "direct" | "standalone" | None (how stored code was loaded),
    "code_path_reason": None | why not directly, "stale_sources":
    [files] (then the graph itself may be stale: callers should re-trace),
    "untrusted": None | why the payloads' writer is not known to be this
    user, "timings": {...}}."""
    t0 = time.perf_counter()
    timings = {}
    if chosen is None:
        chosen = choose(region, payloads, transport_used,
                        check_sources=will_load(untrusted, trust_compiled))
    header, blobs, reason = chosen
    report = {"served": None, "reason": reason, "stale_sources": [], "timings": timings,
              "header": header, "untrusted": untrusted, "code_path": None,
              "code_path_reason": None}
    if reason and reason.startswith("source changed"):
        report["stale_sources"] = reason.split(": ", 1)[1].split(", ")
    if header is not None and not will_load(untrusted, trust_compiled):
        reason = ("stored code not loaded: %s; compiled code runs as this user, so it is loaded "
                  "only from a cache only this user can write (trust_compiled=True or %s=1 "
                  "loads it anyway)" % (untrusted, TRUST_ENV))
        report["reason"] = reason
        header = blobs = None
    if header is not None:
        fn, why = load_direct(blobs, timings)
        report["code_path"], report["code_path_reason"] = "direct", why
        if fn is None:
            fn = load_standalone(blobs, timings)
            report["code_path"] = "standalone"
        report["served"] = "stored"
    else:
        if not allow_compile:
            raise MagiError(-11, "stored code not usable: %s" % reason, "load_region_code")
        grad = False
        if payloads:
            grad = bool(header_of(payloads[0]).get("grad_enabled"))
        fn = compile_from_graph(region, timings, grad, allow_targets)
        report["served"] = "compiled"
    timings["total_s"] = time.perf_counter() - t0
    return fn, report
