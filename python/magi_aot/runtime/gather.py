"""The gathers of a SymmRuntime: what the operator kernels call.

Gatherer.gather() is the Python kernels' entry (magi_aot.runtime.ops; the C++
kernels gather in the extension over the same backend). It keeps, per
(slot list, group size), what a call needs besides the inputs' pointers
(_CallSpec), the cuda gathers' side stream, and the counts `stats` reports.
"""
import time
import weakref
from ctypes import byref, c_uint32, c_uint64, c_void_p

from .._lib import MagiError, lib

__all__ = ["Gatherer"]


def _register_work():
    """torch's registration of a Work on a tensor (what
    `_c10d_functional.wait_tensor` waits on), or None where torch lacks it."""
    try:
        from torch._C._distributed_c10d import _register_work as reg
    except ImportError:
        return None
    return reg


class _CallSpec:
    """SymmRuntime._make_spec's answer for one (slot list, group size)."""
    __slots__ = ("inputs", "single", "shapes", "sizes", "c_sizes", "c_slots", "outputs", "total")


def _contiguous_strides(shape):
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


class _GatherWork:
    """The Work of one deferred gather: `_c10d_functional.wait_tensor` on
    any of the call's outputs calls wait(). torch calls it once per
    registration and then forgets the work. `for_event(event, device)`
    makes the stream current at wait time wait for the gather's completion
    event (stream ordered, no host synchronisation, no per-call closure);
    `make(join, completed)` calls the given functions instead (tests). The
    class derives from torch's Work, so it is built on first use."""
    _cls = None

    @classmethod
    def _build(cls):
        import torch
        from torch._C._distributed_c10d import Work
        current_stream = torch.cuda.current_stream

        class GatherWork(Work):
            __slots__ = ("_event", "_device", "_join", "_completed", "outs")

            def __init__(self, event, device, join, completed):
                super().__init__()
                self._event, self._device, self._join, self._completed = event, device, join, completed
                self.outs = None  # weakrefs of the outputs: the first wait joins the call

            def wait(self, timeout=None):  # noqa: ARG002 - stream-ordered, never blocks
                outs, self.outs = self.outs, (self.outs and ())
                if outs == ():
                    return True  # the call was joined at an earlier output's wait
                if self._event is not None:
                    current_stream(self._device).wait_event(self._event)
                else:
                    self._join()
                for o in outs or ():  # unregister the other outputs (the wait join keeps one wait)
                    o = o()
                    if o is not None:
                        torch.ops._c10d_functional.wait_tensor(o)
                return True

            def is_completed(self):
                return bool(self._event.query() if self._event is not None else self._completed())

        cls._cls = GatherWork
        return GatherWork

    @classmethod
    def make(cls, join, completed):
        return (cls._cls or cls._build())(None, None, join, completed)

    @classmethod
    def for_event(cls, event, device):
        return (cls._cls or cls._build())(event, device, None, None)


class Gatherer:
    """The gathers of one runtime. `state` is the runtime's shared state
    (backend handle, plan, device, lock, closed flag); join as SymmRuntime's."""

    def __init__(self, state, join):
        self._state = state
        self.join = join
        self._specs = {}            # (slot tuple, group size) -> _CallSpec
        self._gather_stream = None  # the cuda gathers' stream (join="wait"), made on first use
        self._reg_work = None       # torch's _register_work, looked up on first use
        self.stats = {"gather_calls": 0, "gathered_tensors": 0, "host_seconds": 0.0, "deferred_joins": 0}
        self._fn_gather = lib.magi_symm_all_gather          # bound once: the hot path
        self._fn_gather_n = lib.magi_symm_all_gather_coalesced

    def _stream(self):
        st = self._state
        if st.device.type != "cuda":
            return None
        import torch
        return c_void_p(torch.cuda.current_stream(st.device).cuda_stream)

    def gather(self, slots, inputs, group_size):
        """The operator kernels' entry (magi_aot.runtime.ops).

        A coalesced call's outputs lie in ONE flat buffer allocated for the
        call, laid out by magi_symm_output_layout: the outputs of one size
        class back to back, so the cuda backend gathers each class with one
        2D copy per group member. Each output is an ordinary contiguous
        tensor of the gathered shape and dtype with a storage of its own: a
        slice of the flat buffer's storage (UntypedStorage[a:b]), which
        holds a reference to it. So outputs alias neither each other nor the
        inputs (torch's contract for an operator without alias annotations;
        opcheck checks it), and the flat buffer lives as long as any output
        (or anything viewing one): a consumer that keeps one output keeps
        the whole call's buffer. On CUDA, record_stream() on an output does
        not reach the flat buffer's block (the caching allocator skips
        storages it did not allocate): a consumer on another stream keeps
        the outputs until its work is done, or synchronises.

        Where the consumer waits (join="wait", cuda): the copies are issued
        on the runtime's gather stream after everything the current stream
        holds, the buffer block is recorded on that stream (it is not reused
        while the copies may write), and a Work registered on every output
        makes the waiting stream wait for the copies at wait_tensor. An
        output used without wait_tensor is unordered with the copies, as
        for torch's functional collectives."""
        import torch
        t0 = time.perf_counter()
        state = self._state
        if state.closed:
            raise MagiError(-1, "SymmRuntime is closed")
        spec = self._specs.get((tuple(slots), group_size))
        if spec is None or any(t.dtype is not dt or t.shape != shp for t, (dt, shp) in zip(inputs, spec.inputs)):
            spec = self._make_spec(slots, inputs, group_size)
        dev = state.device
        if spec.single:
            outs = [torch.empty(spec.shapes[0], dtype=spec.inputs[0][0], device=dev)]
            block = outs[0]
        else:
            block = torch.empty(spec.total, dtype=torch.uint8, device=dev)
            store = block.untyped_storage()
            outs = [torch.empty(0, dtype=dt, device=dev).set_(store[o:o + nb], 0, shape, stride)
                    for o, nb, dt, shape, stride in spec.outputs]
        dsts = [o.data_ptr() for o in outs]
        sizes = spec.sizes
        reg = self._reg_work
        if reg is None and dev.type == "cuda" and self.join == "wait":
            reg = self._reg_work = _register_work()
        deferred = dev.type == "cuda" and self.join == "wait" and reg is not None
        with state.lock:
            if deferred:
                # the copies go on the gather stream, ordered after
                # everything the current stream holds (the output block's
                # earlier users); the block is recorded on the gather
                # stream, so the caching allocator never hands it out while
                # the copies may still write. Under the lock: another
                # thread's hand-off cannot land between this gather and
                # its completion event.
                cur = torch.cuda.current_stream(dev)
                side = self._side_stream(torch)
                side.wait_stream(cur)
                block.record_stream(side)
                stream = c_void_p(side.cuda_stream)
            else:
                stream = self._stream()
            if spec.single:
                self._fn_gather(c_void_p(dsts[0]), sizes[0], state.b, slots[0], stream)
            else:
                n = len(outs)
                self._fn_gather_n((c_void_p * n)(*dsts), spec.c_sizes, state.b, n, spec.c_slots, stream)
            if deferred:
                done = torch.cuda.Event()
                done.record(side)
                work = _GatherWork.for_event(done, dev)
                work.outs = [weakref.ref(o) for o in outs]
                for o in outs:
                    reg(o, work)
            st = self.stats
            st["gather_calls"] += 1
            st["gathered_tensors"] += len(outs)
            st["deferred_joins"] += bool(deferred)
            st["host_seconds"] += time.perf_counter() - t0
        return outs

    _SPEC_CACHE = 4096  # distinct (slot list, group size) remembered

    def _make_spec(self, slots, inputs, group_size):
        """What a call of these slots needs besides the inputs' pointers,
        checked once and remembered: the outputs' shapes, dtypes, strides
        and places in the flat buffer (magi_symm_output_layout), their byte
        sizes, and the C arrays of sizes and slots. Valid for inputs of the
        dtypes and shapes it was made from (_gather checks)."""
        shapes, sizes = [], []
        for slot, t in zip(slots, inputs):
            sl = self._state.plan.slots[slot]
            win = self._state.plan.windows[sl["window"]]
            if group_size != win["group_size"]:
                raise MagiError(-11, "magi::symm_all_gather: group '%s' has size %d, the call says %d"
                                % (win["group"], win["group_size"], group_size))
            if t.device != self._state.device:
                raise MagiError(-1, "magi::symm_all_gather: input on %s, the SymmBuffer is on %s"
                                % (t.device, self._state.device))
            shapes.append((group_size * t.shape[0],) + tuple(t.shape[1:]))
            sizes.append(group_size * sl["nbytes"])
        spec = _CallSpec()
        spec.inputs = [(t.dtype, t.shape) for t in inputs]
        spec.single = len(slots) == 1
        spec.shapes, spec.sizes = shapes, sizes
        n = len(slots)
        spec.c_sizes, spec.c_slots = (c_uint64 * n)(*sizes), (c_uint32 * n)(*slots)
        spec.outputs, spec.total = [], 0
        if not spec.single:
            # the flat buffer: magi_symm_output_layout (docs/SYMM.md "Output layout")
            offs, total = (c_uint64 * n)(), c_uint64()
            lib.magi_symm_output_layout(self._state.plan.ptr, n, spec.c_slots, offs, byref(total))
            spec.total = total.value
            for o, nb, t, shape in zip(offs, sizes, inputs, shapes):
                spec.outputs.append((o, nb, t.dtype, shape, _contiguous_strides(shape)))
        if len(self._specs) >= self._SPEC_CACHE:
            self._specs.clear()
        self._specs[(tuple(slots), group_size)] = spec
        return spec

    def _side_stream(self, torch):
        if self._gather_stream is None:
            self._gather_stream = torch.cuda.Stream(device=self._state.device)
        return self._gather_stream

    def synchronize(self):
        """Copies queued on the gather stream (join="wait") still read the
        windows and write their outputs: wait for them (before the windows go)."""
        if self._gather_stream is not None:
            self._gather_stream.synchronize()


def drop_unread_gathers(gm):
    """Remove from gm's graph every copy-engine gather
    (magi.symm_all_gather[_coalesced]) whose value nothing reads: all its
    users are wait_tensor nodes (through a coalesced call's getitems) with
    no users of their own. SimpleFSDP issues such a gather when a module
    only touches a weight (torchtitan's Llama3 gathers its embedding once
    more than it uses it); a copy-engine gather reads the peers' windows
    one-sidedly, so leaving it out changes nothing on any other rank.
    Gathers kept on c10d are collectives every rank must issue and stay.
    Returns the names of the gathers removed."""
    import torch
    # a graph names an operator by its packet or by an overload of it
    magi = {getattr(torch.ops.magi, n) for n in ("symm_all_gather", "symm_all_gather_coalesced")}
    wait_packet = torch.ops._c10d_functional.wait_tensor

    def packet(t):
        return getattr(t, "overloadpacket", t)

    def unread(node, depth=0):
        # the nodes to erase (users first) when node's value is never read
        out = []
        for u in node.users:
            if packet(u.target) is wait_packet and not u.users:
                out.append(u)
            elif depth == 0 and u.op == "call_function" and getattr(u.target, "__name__", "") == "getitem":
                sub = unread(u, 1)
                if sub is None:
                    return None
                out.extend(sub + [u])
            else:
                return None
        return out
    dropped = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or packet(node.target) not in magi:
            continue
        dead = unread(node)
        if dead is None:
            continue
        for d in dead:
            gm.graph.erase_node(d)
        gm.graph.erase_node(node)
        dropped.append(node.name)
    if dropped:
        gm.recompile()
    return dropped

