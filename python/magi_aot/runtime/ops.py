"""The torch operators magi::symm_all_gather and magi::symm_all_gather_coalesced.

A loaded region whose FSDP weight gathers were rewritten for the copy
engine calls

    torch.ops.magi.symm_all_gather(Tensor input, int group_size, Any group_name) -> Tensor
    torch.ops.magi.symm_all_gather_coalesced(Tensor[] inputs, int group_size, Any group_name) -> Tensor[]

with the schemas of `_c10d_functional.all_gather_into_tensor[_coalesced]`
(copied from the installed torch at registration, so `group_name` is
`str` on torch releases that spell it so and `Any` on those that do not):
the rewrite changes only the target. The output is
`[group_size * input.shape[0], *input.shape[1:]]`, the concatenation of
every group member's shard in group order, like the NCCL op.

Two implementations of the kernels, one per process (IMPLEMENTATION):

  "c++"     the torch extension magi_aot/_C (python/magi_aot/csrc, built
            by the root CMakeLists.txt with MAGI_TORCH_OPS): TORCH_LIBRARY
            kernels that call libmagi_aot's gathers directly; the
            extension holds its registry of bound tensors (magi_torch_ops.h),
            so a runtime that binds from C or C++ uses the same kernels.
  "python"  the torch.library kernels of this module, with REGISTRY.

Both registries are the library's (magi_symm_registry, symm_registry.h):
the entries, the identity, view and value lookups and the refusal messages
are written once, in C.

register() loads the extension when it finds one (MAGI_AOT_TORCH_OPS_LIB,
else _C.so next to the loaded libmagi_aot, else in the package) and falls
back to the Python kernels when there is none or it fails to load
(FALLBACK_REASON says why). MAGI_AOT_OPS=python selects the Python kernels,
MAGI_AOT_OPS=c++ requires the extension (import fails, naming the reason,
when it does not load). Both behave alike: the same schemas, outputs,
layout, lookup rules and messages; a refusal is a MagiError from the Python
kernels and a RuntimeError whose message starts with the status name
("MAGI_ERR_NOT_FOUND: ...") from the C++ ones: catch OP_ERRORS and read it
with as_magi_error(). The fake kernels are this module's in both.

Kernels:
  Meta / fake   the output's shape and dtype (Dynamo, AOTAutograd and
                Inductor trace and compile graphs that contain the ops;
                Inductor emits them as extern fallback calls).
  CPU           the host backend: the output comes from torch's allocator
                and magi_symm_all_gather[_coalesced] memcpy's every
                member's slot from the shared-memory windows into it.
  CUDA          the cuda backend: the output comes from torch's caching
                allocator on the input's device; the library enqueues its
                copy-engine gather after the work on torch's current stream,
                with no host synchronisation. Where the consumer waits is
                the runtime's `join`: "wait" (default), at
                `_c10d_functional.wait_tensor` on the output, as for torch's
                functional collectives (the copies run beside the compute
                issued before the wait); "call", on the current stream at
                the call (wait_tensor is then a no-op). Under "wait", an
                output read without wait_tensor (eager code, opcheck) is
                unordered with its copies, and its Work stays registered in
                torch until waited: wait on every output, as traced graphs
                do, or use "call".

Outputs of the coalesced op (both kernels): one flat buffer per call, laid
out by magi_symm_output_layout (the outputs of one size class back to back,
docs/SYMM.md "Output layout"), so the cuda backend gathers each class with
one 2D copy per group member. Each output is an ordinary contiguous tensor
of its shape and dtype whose storage is a slice of the flat buffer's
storage: outputs never share a storage (no aliasing, as the schema says),
and the flat buffer lives as long as any output or any view of one
(SymmRuntime._gather says more, including record_stream).

How an operator finds its buffer. The operator sees only (input,
group_size, group_name). The input is the rank's local shard of a weight
that a `magi_aot.runtime.SymmRuntime` bound: either the window itself
(alias mode: the parameter lives in the window, so its data_ptr *is* the
slot) or the caller's tensor whose bytes were copied into the slot (copy
mode). Every runtime registers each bound tensor in REGISTRY under
(device, data_ptr, group_name) -> (runtime, slot, layout); the kernel looks
the input up there and gathers through that runtime's backend. An identity
match compares data_ptr, dtype, shape and strides: a view at the same
address (w.t(), a stride-0 expand) is not the shard. A view of a bound
shard in its dtype is gathered as all_gather_into_tensor gathers views:
the shards are gathered whole and every member's block is viewed as the
input views its own shard (the graph is the same on every rank, so every
member passes the same view), concatenated into a new contiguous tensor.
A copy of a shard is found by its bytes; anything else is refused naming
the input (SymmRegistry says more). REGISTRY is the one process-level object of the
package: torch.library operators are process-global, so their kernels can
reach the runtime objects only through it. It holds weak references and
each runtime removes its entries when it is closed (or collected), so it
never keeps a runtime alive; the runtime stays an object the user holds.
"""
import ctypes
import glob
import os
import re
import threading
import weakref
from ctypes import byref, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p

from .. import config
from .._lib import (SYMM_DEVICE_CPU, SYMM_DEVICE_CUDA, SYMM_EQUALS_FN, SYMM_LIVE_FN, MagiError, SymmFound,
                    SymmRegistryHooks, SymmTensor, lib, status_code)
from ..docio import _lib_dir

__all__ = ["REGISTRY", "SymmRegistry", "register", "OPS", "SCHEMAS", "IMPLEMENTATION", "FALLBACK_REASON",
           "EXTENSION_PATH", "OP_ERRORS", "as_magi_error", "bound_count"]

IMPLEMENTATION = None   # "c++" or "python", set by register()
FALLBACK_REASON = None  # why the Python kernels serve (None under "c++")
EXTENSION_PATH = None   # the loaded extension (None under "python")
OP_ERRORS = (MagiError, RuntimeError)  # what the kernels raise when they refuse
_ERR_PREFIX = re.compile(r"(MAGI_ERR_[A-Z_]+): (.*)", re.S)

# torch op name -> the _c10d_functional op whose schema it copies
OPS = {
    "symm_all_gather": "all_gather_into_tensor",
    "symm_all_gather_coalesced": "all_gather_into_tensor_coalesced",
}
# The operators' arguments: those of the c10d gather each replaces, with
# group_name a str on every torch (funcol's is Any on 2.13; Inductor's C++
# wrapper calls an operator without Python only when every argument has a
# C++ type). The C++ extension registers the same (csrc/symm_ops.cpp).
SCHEMAS = {
    "symm_all_gather": "(Tensor input, int group_size, str group_name) -> Tensor",
    "symm_all_gather_coalesced": "(Tensor[] inputs, int group_size, str group_name) -> Tensor[]",
}


def _group_str(group_name):
    """The group name as recorded in the graph (str), also when a caller
    passes a process-group object where the schema says Any."""
    if isinstance(group_name, str):
        return group_name
    name = getattr(group_name, "group_name", None)
    if isinstance(name, str):
        return name
    raise MagiError(-1, "magi::symm_all_gather: group_name %r is not a string" % (group_name,))


def _dtype_row(dtype):
    """The library's dtype-table row of a torch dtype (an address), cached;
    MagiError for a dtype the table lacks."""
    row = _DTYPE_ROWS.get(dtype)
    if row is None:
        row = lib.magi_dtype_lookup(str(dtype).encode())
        if not row:
            raise MagiError(-1, "magi::symm_all_gather: dtype %s is not in the library's dtype table" % dtype)
        _DTYPE_ROWS[dtype] = row
    return row


_DTYPE_ROWS: dict = {}


def _c_tensor(t, version, dtype=True):
    """The magi_symm_tensor of a torch tensor (dtype False: no dtype, a
    contiguous tensor of any dtype matched by size)."""
    n = t.dim()
    dev = t.device
    if dev.type not in ("cpu", "cuda"):
        raise MagiError(-1, "magi::symm_all_gather: input on %s (the kernels serve cpu and cuda)" % dev)
    return SymmTensor(_dtype_row(t.dtype) if dtype else None,
                      SYMM_DEVICE_CPU if dev.type == "cpu" else SYMM_DEVICE_CUDA, dev.index or 0,
                      t.data_ptr(), n, (c_int64 * max(n, 1))(*t.shape), (c_int64 * max(n, 1))(*t.stride()),
                      version)


def _layout_tensor(device, ptr, layout, version):
    """The magi_symm_tensor of an entry given as (device, ptr, layout)
    (SymmRegistry.add): layout None is a contiguous tensor of any dtype."""
    dev = str(device)
    kind, _, index = dev.partition(":")
    if kind not in ("cpu", "cuda"):
        raise MagiError(-1, "SymmRegistry.add: device %s (the kernels serve cpu and cuda)" % dev)
    dtype, shape, strides = layout if layout is not None else (None, (), ())
    n = len(shape)
    return SymmTensor(_dtype_row(dtype) if dtype is not None else None,
                      SYMM_DEVICE_CPU if kind == "cpu" else SYMM_DEVICE_CUDA, int(index or 0), int(ptr), n,
                      (c_int64 * max(n, 1))(*shape), (c_int64 * max(n, 1))(*strides), version)


def _plain(e):
    """A MagiError of a library call as the kernels raise it (status and
    the library's message, without the function's name)."""
    return MagiError(e.code, e.message)


class SymmRegistry:
    """Bound local shards -> (runtime, slot), for the Python kernels: a
    registry of the library (magi_symm_registry, symm_registry.h), which
    holds the entries, resolves an input and words the refusals; the C++
    kernels use the same module.

    Entries: (device, data_ptr, group name) -> the runtime (a weak
    reference; its owner number in the library), the slot, its byte size,
    the bound tensor's layout (dtype, shape, strides; None: a contiguous
    tensor of any dtype), its data version at bind and the weight's name.
    Thread-safe (the library's mutex; the memo under one lock here).

    How an input resolves (lookup; symm_registry.h says more):
      identity  data_ptr, dtype, shape and strides of a bound tensor: the
                slot itself;
      view      another view of a contiguous bound tensor of its dtype
                (transposed, sliced, a stride-0 expand, ...) lying wholly
                inside it: the slot, and the view (element offset, shape,
                strides) that every member applies to its own shard;
      value     a copy: the one slot of that group, size and device whose
                local bytes equal the input's (contiguous) bytes (the
                runtime's _slot_equals answers).
    Anything else is refused naming the input. A closed runtime's entries
    are never answered."""

    _MEMO_CAP = 4096  # input lists remembered by lookup_many (a model has one per gather)

    def __init__(self):
        self._lock = threading.Lock()
        self._version = 0  # bumped by every change: lookup_many's memo is valid for one version
        self._memo = {}
        self._c = None           # the library's registry, made at first use
        self._owners = {}        # owner number -> weak reference to the runtime
        self._numbers = {}       # id(runtime) -> (weak reference, owner number)
        self._next = 0
        self._call = threading.local()  # the current call's runtimes kept alive, tensor, error
        self._fns = (SYMM_LIVE_FN(self._live), SYMM_EQUALS_FN(self._equals))  # alive with the registry
        self._hooks = SymmRegistryHooks(self._fns[0], self._fns[1], None)

    def __del__(self):
        if self._c is not None and lib is not None:
            lib.magi_symm_registry_free(self._c)

    def _handle(self):
        if self._c is None:
            with self._lock:
                if self._c is None:
                    h = c_void_p()
                    lib.magi_symm_registry_new(byref(h))
                    self._c = h
        return self._c

    def _owner(self, runtime):
        """The owner number of `runtime` (a new one the first time)."""
        with self._lock:
            ent = self._numbers.get(id(runtime))
            if ent is not None and ent[0]() is runtime:
                return ent[1]
            self._next += 1
            ref = weakref.ref(runtime)
            self._numbers[id(runtime)] = (ref, self._next)
            self._owners[self._next] = ref
            return self._next

    # the library's hooks: called on the thread of the call
    def _live(self, ctx, owner):
        ref = self._owners.get(owner)
        rt = ref() if ref is not None else None
        if rt is None or rt.closed:
            return 0
        self._call.keep[owner] = rt  # alive until the call returns
        return 1

    def _equals(self, ctx, owner, slot):
        try:
            rt = self._call.keep.get(owner)
            return 1 if rt is not None and rt._slot_equals(slot, self._call.tensor) else 0
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller once C returns
            self._call.error = e
            return 0

    def _begin(self, t=None):
        call = self._call
        call.keep, call.tensor, call.error = {}, t, None
        return call

    def add(self, runtime, device, ptr, group, slot, nbytes, layout=None, version=-1, weight=None):
        """Register the tensor at (device, ptr) for group as bound to slot.
        version: the tensor's data version when its bytes were copied into
        the slot (data_version), -1 when not followed (the window's own
        memory); a gather of it at another version is refused naming
        `weight`. Refused when another open runtime bound it."""
        owner = self._owner(runtime)
        ct = _layout_tensor(device, ptr, layout, version)
        self._begin()
        try:
            lib.magi_symm_registry_add(self._handle(), owner, str(group).encode(), slot, nbytes,
                                       None if weight is None else str(weight).encode(), byref(ct),
                                       byref(self._hooks))
        except MagiError as e:
            raise _plain(e) from None
        finally:
            self._call.keep = None
        with self._lock:
            self._version += 1

    def remove_runtime(self, runtime):
        """Drop the entries of `runtime` and of runtimes already collected."""
        with self._lock:
            dead = [n for n, ref in self._owners.items() if ref() is None or ref() is runtime]
            for n in dead:
                del self._owners[n]
            for k in [k for k, (ref, n) in self._numbers.items() if n in dead]:
                del self._numbers[k]
            self._version += 1
        if self._c is not None:
            for n in dead:
                lib.magi_symm_registry_remove(self._c, n)

    def __len__(self):
        return int(lib.magi_symm_registry_count(self._c)) if self._c is not None else 0

    def lookup(self, t, group_name):
        """(runtime, slot, view) of an input tensor; view is None for an
        identity or value match, else (element offset, shape, strides) of
        the input within its bound tensor (the class docstring says how).
        MagiError naming tensor and group when no slot matches or several
        do."""
        return self._lookup(t, _group_str(group_name))[:3]

    def _lookup(self, t, group):
        """lookup()'s answer and whether it may be remembered (identity
        and view matches: they depend only on the registry and the
        input's pointer and layout, not on its bytes)."""
        ct = _c_tensor(t, data_version(t))
        found = SymmFound()
        call = self._begin(t)
        try:
            lib.magi_symm_registry_lookup(byref(found), self._handle(), group.encode(), byref(ct),
                                          byref(self._hooks))
            if call.error is not None:
                raise call.error
            rt = call.keep[found.owner]
        except MagiError as e:
            if call.error is not None:
                raise call.error from None
            raise _plain(e) from None
        finally:
            call.keep, call.tensor, call.error = None, None, None
        view = (found.offset, tuple(t.shape), tuple(t.stride())) if found.view else None
        return rt, found.slot, view, bool(found.by_identity)

    def lookup_many(self, ts, group_name):
        """(runtime, [slot, ...], [view, ...]) of a coalesced call's
        inputs: lookup() of each, once per input list. The answer for a
        list resolved by identity or view is remembered by (group, device,
        each input's data pointer, dtype, shape and strides) while the
        registry is unchanged, so a model's steady-state call costs one
        dictionary probe instead of one lookup per input. All inputs must
        resolve to one runtime."""
        group = _group_str(group_name)
        key = (group, str(ts[0].device), tuple([(t.data_ptr(), t.dtype, t.shape, t.stride()) for t in ts]))
        with self._lock:
            hit = self._memo.get(key)
            version = self._version
        if hit is not None and hit[0] == version and hit[4] == [data_version(t) for t in ts]:
            rt = hit[1]()
            if rt is not None and not rt.closed:
                return rt, hit[2], hit[3]
        found = [self._lookup(t, group) for t in ts]
        rt = found[0][0]
        if any(f[0] is not rt for f in found):
            raise MagiError(-1, "magi::symm_all_gather_coalesced: inputs bound by different runtimes")
        slots = [f[1] for f in found]
        views = [f[2] for f in found]
        keep = all(f[3] for f in found) and all(str(t.device) == key[1] for t in ts)
        with self._lock:
            if keep and version == self._version:
                if len(self._memo) >= self._MEMO_CAP:
                    self._memo.clear()
                self._memo[key] = (version, weakref.ref(rt), slots, views,
                                   [data_version(t) for t in ts])
        return rt, slots, views


def data_version(t):
    """t's data version: torch's version counter, bumped by every in-place
    change (mul_, copy_, load_state_dict); -1 for an inference tensor,
    which has none."""
    return -1 if t.is_inference() else t._version


def check_version(weight, slot, bound, t):
    """Refuse a gather served from `slot`, which holds the bytes of tensor
    t at data version `bound`, when t has changed in place since (the
    library's refusal, naming `weight`)."""
    try:
        lib.magi_symm_check_version(str(weight).encode(), slot, bound, data_version(t))
    except MagiError as e:
        raise _plain(e) from None


REGISTRY = SymmRegistry()
_LIBS: list = []  # the torch.library.Library objects: alive as long as the process


def _out_shape(t, group_size):
    return (group_size * t.shape[0],) + tuple(t.shape[1:])


class _SlotInput:
    """What SymmRuntime._gather reads of an input (dtype, shape, device):
    the bound shard of a slot, gathered whole for an input that views it."""
    __slots__ = ("dtype", "shape", "device")

    def __init__(self, rt, slot, t):
        import torch
        self.dtype, self.device = t.dtype, t.device
        self.shape = torch.Size(rt.slots[slot]["shape"])


def _apply_view(out, view, group_size):
    """The gather of a view from the gather of the shards it views: every
    member's block of `out` viewed as the input views its own shard, the
    blocks concatenated (a new contiguous tensor)."""
    import torch
    offset, shape, strides = view
    if out.is_cuda:  # a deferred gather: the current stream waits for the copies first
        out = torch.ops._c10d_functional.wait_tensor(out)
    per = out.numel() // group_size
    blocks = out.reshape(group_size, per).as_strided((group_size,) + shape, (per,) + strides, offset)
    return blocks.contiguous().reshape((group_size * shape[0],) + shape[1:])


def _gather(t, group_size, group_name):
    rt, slot, view = REGISTRY.lookup(t, group_name)
    if view is None:
        return rt._gather([slot], [t], group_size)[0]
    return _apply_view(rt._gather([slot], [_SlotInput(rt, slot, t)], group_size)[0], view, group_size)


def _gather_coalesced(ts, group_size, group_name):
    if not ts:
        return []
    rt, slots, views = REGISTRY.lookup_many(ts, group_name)
    if not any(views):
        return rt._gather(slots, list(ts), group_size)
    ins = [t if v is None else _SlotInput(rt, s, t) for t, s, v in zip(ts, slots, views)]
    outs = rt._gather(slots, ins, group_size)
    return [o if v is None else _apply_view(o, v, group_size) for o, v in zip(outs, views)]


def _keep_launch_order():
    """Install the launch-order pass in the thread that is tracing a magi
    gather. Inductor's settings are per thread on newer torch (a
    ContextVar), so the install `register()` made reaches only the thread
    that registered the operators: a server that compiles in a worker
    thread would lose the order. The fake kernels run in the compiling
    thread while Dynamo and AOTAutograd trace, before Inductor reads its
    graph passes and computes its cache key, so the pass is in place for
    that compile, unless the thread set Inductor's hook itself. Idempotent
    and cheap (an attribute check)."""
    from ..compile.launch_order import install_unless_chosen
    install_unless_chosen()


def _fake(t, group_size, group_name):
    _keep_launch_order()
    return t.new_empty(_out_shape(t, group_size))


def _fake_coalesced(ts, group_size, group_name):
    _keep_launch_order()
    return [t.new_empty(_out_shape(t, group_size)) for t in ts]


def as_magi_error(e):
    """The MagiError of an operator's refusal: `e` itself from the Python
    kernels, or one made from the C++ kernels' RuntimeError
    ("MAGI_ERR_NOT_FOUND: message"); None for another exception."""
    if isinstance(e, MagiError):
        return e
    if isinstance(e, RuntimeError):
        m = _ERR_PREFIX.match(str(e))
        if m:
            code = status_code(m.group(1))
            return MagiError(-1 if code is None else code, m.group(2).rstrip())
    return None


class MagiOpsStats(ctypes.Structure):
    """magi_ops_stats (magi_torch_ops.h)."""
    _fields_ = [("gather_calls", c_uint64), ("gathered_tensors", c_uint64),
                ("deferred_joins", c_uint64), ("host_seconds", c_double)]


class _Extension:
    """The C entry points of the loaded extension (magi_torch_ops.h)."""

    def __init__(self, path):
        dll = ctypes.CDLL(path)
        self.new = dll.magi_ops_runtime_new
        self.new.argtypes = [ctypes.POINTER(c_void_p), c_void_p, c_void_p, c_int, c_int, c_int, c_char_p, c_size_t]
        self.bind = dll.magi_ops_runtime_bind
        self.bind.argtypes = [c_void_p, c_uint32, c_void_p, c_char_p, c_uint32, ctypes.POINTER(c_int64),
                              ctypes.POINTER(c_int64), c_int64, c_char_p, c_size_t]
        self.close = dll.magi_ops_runtime_close
        self.close.argtypes = [c_void_p]
        self.free = dll.magi_ops_runtime_free
        self.free.argtypes = [c_void_p]
        self.stats = dll.magi_ops_runtime_stats
        self.stats.argtypes = [ctypes.POINTER(MagiOpsStats), c_void_p]
        self.count = dll.magi_ops_bound_count
        self.count.argtypes = []
        self.count.restype = c_uint64
        for f in (self.new, self.bind, self.stats):
            f.restype = c_int
        self.close.restype = self.free.restype = None


_EXT: list = []  # the loaded extension's entry points (one, when IMPLEMENTATION is "c++")


def _candidates():
    """Where the extension may be, in order (docio finds _docbuild alike)."""
    env = config.TORCH_OPS_LIB.get()
    if env:
        return [env]
    out = []
    try:
        d = _lib_dir()
    except Exception:  # noqa: BLE001 - no library: the package directory only
        d = ""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # magi_aot/, above runtime/
    for base in ([d] if d else []) + [package]:
        out += sorted(glob.glob(os.path.join(base, "_C.so")) + glob.glob(os.path.join(base, "_C.*.so")))
    return out


def _load_extension(torch):
    """The path of the loaded extension, or None and why not."""
    paths = _candidates()
    if not paths:
        return None, "no _C.so next to the library nor in the package (built with MAGI_TORCH_OPS)"
    why = []
    for path in paths:
        if not os.path.isfile(path):
            why.append("%s: no such file" % path)
            continue
        try:
            torch.ops.load_library(path)
            ext = _Extension(path)
        except (OSError, RuntimeError, AttributeError) as e:
            why.append("%s: %s" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
            continue
        if not hasattr(torch.ops.magi, "symm_all_gather_coalesced"):
            why.append("%s: loaded but registered no magi::symm_all_gather_coalesced" % path)
            continue
        _EXT.append(ext)
        return path, None
    return None, "; ".join(why)


def register():
    """Define the two operators once per process (idempotent; called when
    magi_aot.runtime.ops or magi_aot.runtime is imported): the extension's kernels
    where it loads, else the Python ones (the module docstring says how
    the choice is made). Returns torch.ops.magi."""
    global IMPLEMENTATION, FALLBACK_REASON, EXTENSION_PATH
    import torch
    if _LIBS:
        return torch.ops.magi
    want = config.OPS.get()
    if want not in ("auto", "c++", "python"):
        raise MagiError(-1, "MAGI_AOT_OPS=%s: give auto, c++ or python" % want)
    path, why = (None, "MAGI_AOT_OPS=python") if want == "python" else _load_extension(torch)
    if path is None and want == "c++":
        raise MagiError(-13, "MAGI_AOT_OPS=c++ but the operator extension did not load: %s" % why)
    lib = torch.library.Library("magi", "FRAGMENT")
    impls = {"symm_all_gather": (_gather, _fake),
             "symm_all_gather_coalesced": (_gather_coalesced, _fake_coalesced)}
    for name, c10d in OPS.items():
        kernel, fake = impls[name]
        if path is None:
            lib.define(name + SCHEMAS[name])
            lib.impl(name, kernel, "CPU")
            lib.impl(name, kernel, "CUDA")
        torch.library.register_fake("magi::" + name, fake, lib=lib)
    _LIBS.append(lib)
    IMPLEMENTATION, FALLBACK_REASON, EXTENSION_PATH = ("c++", None, path) if path else ("python", why, None)
    # Inductor keeps the gathers' launches where the graph puts them (its
    # peak-memory pass would sink each to its wait); graphs without a magi
    # gather pass through unchanged
    from ..compile.launch_order import install
    install()
    return torch.ops.magi


# ------------------------------------------------ the runtime's registrations
def attach(rt):
    """The extension's runtime over `rt`'s backend and plan (an opaque
    handle), or None under the Python kernels (then REGISTRY serves)."""
    if IMPLEMENTATION != "c++":
        return None
    ext = _EXT[0]
    h, err = c_void_p(), ctypes.create_string_buffer(512)
    dev = rt.device
    rc = ext.new(byref(h), rt._b, rt._plan, 0 if dev.type == "cpu" else 1, dev.index or 0,
                 0 if rt.join == "wait" else 1, err, len(err))
    if rc:
        raise MagiError(rc, err.value.decode(errors="replace"))
    return h


def bind_tensor(handle, slot, t, follow=True):
    """Register tensor t as bound to `slot` with the extension's runtime
    (refused unless t has the slot's dtype and shape and is contiguous).
    follow: refuse a later gather of t once it changed in place (its bytes
    were copied into the slot; False for the window's own memory)."""
    ext = _EXT[0]
    n = t.dim()
    shape, strides = (c_int64 * max(n, 1))(*t.shape), (c_int64 * max(n, 1))(*t.stride())
    err = ctypes.create_string_buffer(512)
    rc = ext.bind(handle, slot, c_void_p(t.data_ptr()), str(t.dtype).replace("torch.", "").encode(), n,
                  shape, strides, data_version(t) if follow else -1, err, len(err))
    if rc:
        raise MagiError(rc, err.value.decode(errors="replace"))


def runtime_stats(handle):
    """{gather_calls, gathered_tensors, deferred_joins, host_seconds} of the
    extension's runtime."""
    st = MagiOpsStats()
    _EXT[0].stats(byref(st), handle)
    return {k: getattr(st, k) for k, _ in MagiOpsStats._fields_}


def detach(handle):
    """Close and free the extension's runtime (its tensors unregistered,
    queued CUDA copies waited for); its last stats."""
    st = runtime_stats(handle)
    _EXT[0].free(handle)
    return st


def bound_count():
    """Tensors registered by open runtimes with the kernels in use."""
    if IMPLEMENTATION == "c++":
        return int(_EXT[0].count())
    return len(REGISTRY)


register()
