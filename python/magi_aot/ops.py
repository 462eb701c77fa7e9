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
(device, data_ptr, group_name) -> (runtime, slot); the kernel looks the
input up there, checks size and dtype against the slot, and gathers through
that runtime's backend. REGISTRY is the one process-level object of the
package: torch.library operators are process-global, so their kernels can
reach the runtime objects only through it. It holds weak references and
each runtime removes its entries when it is closed (or collected), so it
never keeps a runtime alive; the runtime stays an object the user holds.
"""
import threading
import weakref

from ._lib import MagiError

__all__ = ["REGISTRY", "SymmRegistry", "register", "OPS"]

# torch op name -> the _c10d_functional op whose schema it copies
OPS = {
    "symm_all_gather": "all_gather_into_tensor",
    "symm_all_gather_coalesced": "all_gather_into_tensor_coalesced",
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


class SymmRegistry:
    """Bound local shards -> (runtime, slot), for the operator kernels.

    Keys are (device string, data_ptr, group name). Values hold a weak
    reference to the runtime. Thread-safe (one lock)."""

    _MEMO_CAP = 4096  # input lists remembered by lookup_many (a model has one per gather)

    def __init__(self):
        self._lock = threading.Lock()
        self._entries = {}
        self._version = 0  # bumped by every change: lookup_many's memo is valid for one version
        self._memo = {}

    def add(self, runtime, device, ptr, group, slot, nbytes):
        key = (str(device), int(ptr), str(group))
        ref = weakref.ref(runtime)
        with self._lock:
            old = self._entries.get(key)
            if old is not None:
                rt = old[0]()
                if rt is not None and rt is not runtime and not rt.closed:
                    raise MagiError(-11, "tensor at 0x%x on %s is already bound for group '%s' by "
                                    "another SymmRuntime (slot %d)" % (ptr, device, group, old[1]))
            self._entries[key] = (ref, slot, nbytes)
            self._version += 1

    def remove_runtime(self, runtime):
        with self._lock:
            dead = [k for k, v in self._entries.items() if v[0]() in (None, runtime)]
            for k in dead:
                del self._entries[k]
            self._version += 1

    def __len__(self):
        with self._lock:
            return len(self._entries)

    def lookup(self, t, group_name):
        """(runtime, slot) of an input tensor: a bound tensor by identity
        (device, data_ptr, group), else by value: the one slot of that
        group, size and device whose local bytes equal the input's (a copy
        of a bound shard: torch.library.opcheck clones its inputs, a
        compiler may copy an input). MagiError naming tensor and group when
        no slot matches or several do."""
        group = _group_str(group_name)
        key = (str(t.device), int(t.data_ptr()), group)
        have = t.numel() * t.element_size()
        with self._lock:
            ent = self._entries.get(key)
            cands = [] if ent else [v for k, v in self._entries.items()
                                    if k[0] == key[0] and k[2] == group and v[2] == have]
        rt = ent[0]() if ent else None
        if rt is not None and not rt.closed:
            slot, nbytes = ent[1], ent[2]
            if have != nbytes:
                raise MagiError(-11, "magi::symm_all_gather: tensor at 0x%x for group '%s' has %d "
                                "bytes, its slot %d holds %d" % (key[1], group, have, slot, nbytes))
            return rt, slot
        matches = {}
        for ref, slot, _ in cands:
            r = ref()
            if r is None or r.closed or (id(r), slot) in matches:
                continue
            if r._slot_equals(slot, t):
                matches[(id(r), slot)] = (r, slot)
        if len(matches) == 1:
            return next(iter(matches.values()))
        why = ("no SymmRuntime has bound it, nor a shard with its bytes" if not matches else
               "it is no bound tensor, and %d bound shards hold its bytes" % len(matches))
        raise MagiError(-14, "magi::symm_all_gather: tensor at 0x%x (%s %s on %s) for group '%s': "
                        "%s; bind the rank's shards (SymmRuntime.bind / alias) before running the "
                        "region" % (key[1], t.dtype, list(t.shape), t.device, group, why))


    def lookup_many(self, ts, group_name):
        """(runtime, [slot, ...]) of a coalesced call's inputs: lookup() of
        each, once per input list. The answer for a list of bound tensors
        (identity hits) is remembered by (group, device, data pointers)
        while the registry is unchanged, so a model's steady-state call
        costs one dictionary probe instead of one lookup per input. All
        inputs must resolve to one runtime."""
        group = _group_str(group_name)
        key = (group, str(ts[0].device), tuple([t.data_ptr() for t in ts]))
        with self._lock:
            hit = self._memo.get(key)
            version = self._version
        if hit is not None and hit[0] == version and [t.nbytes for t in ts] == hit[3]:
            rt = hit[1]()
            if rt is not None and not rt.closed:
                return rt, hit[2]
        found = [self.lookup(t, group) for t in ts]
        rt = found[0][0]
        if any(r is not rt for r, _ in found):
            raise MagiError(-1, "magi::symm_all_gather_coalesced: inputs bound by different runtimes")
        slots = [s for _, s in found]
        identity = all(str(t.device) == key[1] for t in ts)
        with self._lock:
            if identity and all((key[1], p, group) in self._entries for p in key[2]) and version == self._version:
                if len(self._memo) >= self._MEMO_CAP:
                    self._memo.clear()
                self._memo[key] = (version, weakref.ref(rt), slots, [t.nbytes for t in ts])
        return rt, slots


REGISTRY = SymmRegistry()
_LIBS = []  # the torch.library.Library objects: alive as long as the process


def _out_shape(t, group_size):
    return (group_size * t.shape[0],) + tuple(t.shape[1:])


def _gather(t, group_size, group_name):
    rt, slot = REGISTRY.lookup(t, group_name)
    return rt._gather([slot], [t], group_size)[0]


def _gather_coalesced(ts, group_size, group_name):
    if not ts:
        return []
    rt, slots = REGISTRY.lookup_many(ts, group_name)
    return rt._gather(slots, list(ts), group_size)


def _fake(t, group_size, group_name):
    return t.new_empty(_out_shape(t, group_size))


def _fake_coalesced(ts, group_size, group_name):
    return [t.new_empty(_out_shape(t, group_size)) for t in ts]


def register():
    """Define the two operators once per process (idempotent; called when
    magi_aot.ops or magi_aot.runtime is imported). Returns torch.ops.magi."""
    import torch
    if _LIBS:
        return torch.ops.magi
    lib = torch.library.Library("magi", "FRAGMENT")
    impls = {"symm_all_gather": (_gather, _fake),
             "symm_all_gather_coalesced": (_gather_coalesced, _fake_coalesced)}
    for name, c10d in OPS.items():
        schema = str(getattr(torch.ops._c10d_functional, c10d).default._schema)
        # "_c10d_functional::all_gather_into_tensor(Tensor input, ...) -> Tensor"
        sig = schema[schema.index("("):]
        lib.define(name + sig)
        kernel, fake = impls[name]
        lib.impl(name, kernel, "CPU")
        lib.impl(name, kernel, "CUDA")
        torch.library.register_fake("magi::" + name, fake, lib=lib)
    _LIBS.append(lib)
    return torch.ops.magi


register()
