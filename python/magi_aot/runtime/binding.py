"""Shard binding of a SymmRuntime: the caller's weights into the windows,
and the placeholder values a region runs with.

bind() (copy mode) copies each rank-local shard into its slot; alias()
hands out tensors over the slots themselves. Either way the tensors are
registered where the operator kernels find them (magi_aot.runtime.ops): with the
extension's runtime over this backend under the C++ kernels, in
magi_aot.runtime.ops.REGISTRY under the Python ones. A weight whose lowered gather
casts or pads it is cast and padded here, once (docs/SYMM.md, "at bind").
"""
import ctypes
from ctypes import byref, c_void_p

from . import ops
from .._lib import MagiError, lib
from .plan import buffer_name, dynamo_param_name

__all__ = ["Binder", "dtype_of"]

_MISSING = object()


def dtype_of(torch, name):
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise MagiError(-4, "unknown dtype '%s' in the plan" % name)
    return dt


class _CudaArray:
    """A device pointer as __cuda_array_interface__ bytes (torch.as_tensor
    keeps this object, and so `owner`, alive with the tensor)."""

    def __init__(self, ptr, nbytes, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2, "strides": None}


def _pick(d, p):
    for k in (p["name"], p["target"]):
        if k in d:
            return d[k]
    for fqn, v in d.items():
        if p["target"] in (dynamo_param_name(fqn), buffer_name(fqn), "L_%s_" % fqn):
            return v
    return _MISSING


def _is_dtensor(v):
    return type(v).__name__ == "DTensor" or (hasattr(v, "to_local") and hasattr(v, "placements"))


def _check_static_shape(p, ex, v):
    """A tensor value against the region's recorded static sizes: the rank
    and every concrete dimension (a symbolic one takes any size)."""
    shape = ex.get("shape")
    if ex.get("kind") != "tensor" or not isinstance(shape, list) or not hasattr(v, "shape"):
        return
    given = list(v.shape)
    if len(given) != len(shape):
        raise MagiError(-11, "SymmRuntime.args: placeholder '%s' has %d dimensions in the region (%s); the "
                        "value given has %d (%s)" % (p["name"], len(shape), shape, len(given), given))
    for d, (want, got) in enumerate(zip(shape, given)):
        if isinstance(want, int) and want != int(got):
            raise MagiError(-11, "SymmRuntime.args: placeholder '%s' dimension %d is %d in the region (a static "
                            "size) but %d in the value given (shape %s, recorded %s)"
                            % (p["name"], d, want, int(got), given, shape))


def _argument(torch, p, ex, v, device):
    """A value given for placeholder p (example ex), as the graph takes it:
    a Python number for a 0-d tensor placeholder (Dynamo's lifted float
    module attributes, e.g. RMSNorm's eps) becomes that 0-d tensor; a
    DTensor where the rank-local region takes its local shard, another
    type where a tensor is taken, or a tensor of other static sizes is
    refused naming the placeholder."""
    kind = ex.get("kind")
    if kind != "tensor":
        return v
    if _is_dtensor(v) and "dtensor" not in ex:
        raise MagiError(-4, "SymmRuntime.args: placeholder '%s' takes this rank's local tensor; a DTensor "
                        "was given (pass its to_local(), or bind it)" % p["name"])
    if isinstance(v, (bool, int, float)) and not isinstance(v, torch.Tensor):
        if ex.get("shape") != []:
            raise MagiError(-4, "SymmRuntime.args: placeholder '%s' is a tensor of shape %s; a Python %s was "
                            "given (only a 0-d tensor placeholder takes a number)"
                            % (p["name"], ex.get("shape"), type(v).__name__))
        dtype = getattr(torch, str(ex.get("dtype") or ""), None)
        if not isinstance(dtype, torch.dtype):
            raise MagiError(-4, "SymmRuntime.args: placeholder '%s' records no dtype for the number given"
                            % p["name"])
        dev = ex.get("device") or "cpu"
        dev = torch.device("cpu") if str(dev) == "cpu" else device
        return torch.tensor(v, dtype=dtype, device=dev)
    if not isinstance(v, torch.Tensor):
        raise MagiError(-4, "SymmRuntime.args: placeholder '%s' takes a tensor (%s %s); a %s was given"
                        % (p["name"], ex.get("dtype"), ex.get("shape"), type(v).__name__))
    _check_static_shape(p, ex, v)
    return v


class Binder:
    """The bound tensors of one runtime. `state`: the runtime's shared state
    (backend, plan, device, lock, handles, closed flag); `registry_owner`: a
    weak reference to the runtime, under which the Python kernels' registry
    files the tensors."""

    def __init__(self, state, registry_owner):
        self._state = state
        self._owner = registry_owner
        self.ops_h = None   # the C++ kernels' runtime over the backend (magi_aot.runtime.ops.attach)
        self.bound = {}     # weight -> tensor handed to the graph
        self.plain = {}     # weights without a slot (kept gathers), by name
        self.sources = {}   # weight cast/padded at bind -> (weakref to the caller's tensor,
        #                     its version at bind, slot)

    # ------------------------------------------------------------- windows
    def _stream(self):
        st = self._state
        if st.device.type != "cuda":
            return None
        import torch
        return c_void_p(torch.cuda.current_stream(st.device).cuda_stream)

    def window_view(self, slot):
        """A uint8 tensor over the local slot (no copy), and the slot's
        dtype and shape over it. Its storage holds the runtime's Handles:
        the window stays mapped while the tensor, or any view of it, lives."""
        import torch
        st = self._state
        sl = st.plan.slots[slot]
        p = c_void_p()
        lib.magi_symm_local_slot_ptr(byref(p), st.b, slot)
        if st.device.type == "cpu":
            buf = (ctypes.c_uint8 * sl["nbytes"]).from_address(p.value)
            buf.owner = st.handles  # torch.frombuffer keeps buf alive with the storage
            raw = torch.frombuffer(buf, dtype=torch.uint8)
        else:
            raw = torch.as_tensor(_CudaArray(p.value, sl["nbytes"], st.handles), device=st.device)
        win = st.plan.windows[sl["window"]]
        return raw, raw.view(dtype_of(torch, win["dtype"])).view(sl["shape"])

    def slot_equals(self, slot, t):
        """Whether the local slot holds exactly t's bytes (the registry's
        lookup by value)."""
        import torch
        st = self._state
        with st.lock:
            if st.closed:
                return False
            raw, _ = self.window_view(slot)
            if st.device.type == "cuda":
                torch.cuda.current_stream(st.device).synchronize()
            mine = t.detach().contiguous().reshape(-1).view(torch.uint8)
            return mine.numel() == raw.numel() and bool(torch.equal(mine, raw.to(mine.device)))

    def _register(self, slot, t, follow):
        """Register t as bound to slot with the kernels in use. follow: t's
        bytes were copied into the slot, so a gather of t after an
        in-place change is refused (False for the window's own memory)."""
        if self.ops_h is not None:
            ops.bind_tensor(self.ops_h, slot, t, follow)
            return
        plan = self._state.plan
        sl = plan.slots[slot]
        win = plan.windows[sl["window"]]
        ops.REGISTRY.add(self._owner(), t.device, t.data_ptr(), win["group"], slot, sl["nbytes"],
                         layout=(t.dtype, tuple(t.shape), tuple(t.stride())),
                         version=ops.data_version(t) if follow else -1, weight=sl["weight"])

    # -------------------------------------------------------------- shards
    @staticmethod
    def _local(t):
        if hasattr(t, "to_local") and callable(t.to_local):  # a DTensor parameter
            t = t.to_local()
        return t.detach() if hasattr(t, "detach") else t

    def bind(self, shards, strict):
        """SymmRuntime.bind (its doc)."""
        import torch
        st = self._state
        plan = st.plan
        given = set()
        out = {}
        with st.lock:
            for name, t in shards.items():
                t, slot = self._shard_for(name, t, torch)
                if slot is None:
                    continue
                sl = plan.slots[slot]
                src = t if t.is_contiguous() else t.contiguous()
                lib.magi_symm_bind(st.b, slot, c_void_p(src.data_ptr()), sl["nbytes"], self._stream())
                if src is not t and st.device.type == "cuda":
                    torch.cuda.current_stream(st.device).synchronize()
                self._register(slot, t, True)
                _, view = self.window_view(slot)
                self._register(slot, view, False)
                self.bound[sl["weight"]] = t
                out[sl["weight"]] = t
                given.add(slot)
        missing = [plan.slots[i]["weight"] for i in range(len(plan.slots))
                   if i not in given and plan.slots[i]["weight"] not in self.bound]
        if strict and missing:
            raise MagiError(-14, "SymmRuntime.bind: no shard given for %s" % ", ".join(missing))
        return out

    def alias(self, shards):
        """SymmRuntime.alias (its doc)."""
        import torch
        st = self._state
        out = {}
        with st.lock:
            for i, sl in enumerate(st.plan.slots):
                _, view = self.window_view(i)
                self._register(i, view, False)
                self.bound[sl["weight"]] = view
                out[sl["weight"]] = view
        for name, t in (shards or {}).items():
            t, slot = self._shard_for(name, t, torch)
            if slot is not None:
                out[st.plan.slots[slot]["weight"]].copy_(t)
        return out

    def _shard_for(self, name, t, torch):
        """(local tensor, slot) of a shard given under `name`, checked
        against its slot; slot None when it has none (kept as a plain
        input for args())."""
        plan = self._state.plan
        t = self._local(t)
        slot = plan.slot_for(name)
        if slot is None:
            self.plain[name] = t
            return t, None
        sl = plan.slots[slot]
        src = t
        t = self._bind_transform(name, sl, t, torch)
        if t is not src:
            # the slot holds a converted copy: the gathers never see the
            # caller's tensor, so args() checks its version
            import weakref
            self.sources[sl["weight"]] = (weakref.ref(src), ops.data_version(src), slot)
        else:
            self.sources.pop(sl["weight"], None)
        self._check_shard(name, sl, plan.windows[sl["window"]], t, torch)
        return t, slot

    def _bind_transform(self, name, sl, t, torch):
        """A weight whose lowered gather casts or pads it (docs/SYMM.md,
        "at bind"): the caller gives its own shard, which is cast to the
        slot's dtype and padded with zero rows to the chunk here, once."""
        plan = self._state.plan
        bt = plan.bind_transform(sl["weight"])
        if bt is None:
            return t
        want = dtype_of(torch, bt["dtype"])
        rows = int(bt["rows"])
        if t.dtype != want or t.dim() != len(sl["shape"]) or t.shape[0] != rows or \
                list(t.shape[1:]) != list(sl["shape"][1:]):
            raise MagiError(-4, "SymmRuntime.bind: '%s' should be this rank's shard, %s of %d rows "
                            "x %s (it is cast and padded here, once); got %s %s"
                            % (name, bt["dtype"], rows, list(sl["shape"][1:]), str(t.dtype).replace("torch.", ""),
                               list(t.shape)))
        win = plan.windows[sl["window"]]
        out = torch.zeros(sl["shape"], dtype=dtype_of(torch, win["dtype"]), device=t.device)
        out[:rows].copy_(t)
        return out

    def _check_shard(self, name, sl, win, t, torch):
        dev = self._state.device
        want = dtype_of(torch, win["dtype"])
        if t.dtype != want or list(t.shape) != sl["shape"] or t.device != dev:
            raise MagiError(-11, "SymmRuntime.bind: '%s' (slot of %s, group '%s') is %s %s on %s; "
                            "the plan needs %s %s on %s" % (name, sl["weight"], win["group"], t.dtype,
                                                           list(t.shape), t.device, want, sl["shape"], dev))

    # ---------------------------------------------------------------- args
    def check_sources(self):
        """Refuse when a weight cast or padded at bind was changed in place
        since (its slot holds the converted old bytes)."""
        for weight, (ref, version, slot) in self.sources.items():
            src = ref()
            if src is not None:
                ops.check_version(weight, slot, version, src)

    def args(self, region, values):
        """SymmRuntime.args (its doc) for Region `region`."""
        import torch
        self.check_sources()
        values = dict(values or {})
        out, syms, pending = [], {}, []
        for p in region.placeholders:
            v = _pick(values, p)
            ex = p["example_value"] or {}
            if v is not _MISSING and p["target"] in self.bound:
                raise MagiError(-4, "SymmRuntime.args: placeholder '%s' is the bound weight %s: its value is "
                                "the bound shard (bind() or alias() again to change it), not one given here"
                                % (p["name"], p["target"]))
            if v is not _MISSING:
                v = _argument(torch, p, ex, v, self._state.device)
            if v is _MISSING and p["target"] in self.bound:
                v = self.bound[p["target"]]
            if v is _MISSING:
                v = _pick(self.plain, p)
                if v is not _MISSING:
                    _check_static_shape(p, ex, v)
            if v is _MISSING:
                if ex.get("kind") == "symint" and isinstance(ex.get("expr"), str):
                    pending.append((len(out), ex["expr"], p["name"]))
                    out.append(None)
                    continue
                raise MagiError(-14, "SymmRuntime.args: no value for placeholder '%s' (target %s)"
                                % (p["name"], p["target"]))
            if ex.get("kind") == "tensor" and hasattr(v, "shape"):
                for d, x in zip(ex["shape"], v.shape):
                    if isinstance(d, str) and d.isidentifier():
                        syms.setdefault(d, int(x))
            out.append(v)
        for i, expr, name in pending:
            if expr not in syms:
                raise MagiError(-14, "SymmRuntime.args: SymInt placeholder '%s' (%s) is not a "
                                "dimension of any tensor input: pass it in values" % (name, expr))
            out[i] = syms[expr]
        return out

    def clear(self):
        self.bound, self.plain, self.sources = {}, {}, {}
