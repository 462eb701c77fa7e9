"""The plan a SymmRuntime binds: one C load of its regions, done once.

RuntimePlan.open() takes the regions a runtime was given:
  - exactly the regions of one rank-local load made for this rank, world,
    cast/pad choice and window cap (magi_aot.load_many(..., rank=, world=)):
    that load's LoadedSet is adopted as it stands - its plan, its lowered
    and rank-local regions - and the runtime's regions are the caller's own
    Region objects (`adopted` is True);
  - anything else (paths, Regions of a load without a rank view, of another
    rank, or built from documents): one load through the C loader for this
    rank (paths are read from their files; a Region's document is handed
    over as it stands, since the caller may have changed it), which does the
    rank-local form, the lowering, the plan and the rewrite once.
Either way nothing is planned or lowered twice, and the runtime keeps the
LoadedSet open as long as its backend (which borrows the plan) lives.
"""
import ctypes
import os
from ctypes import byref, c_void_p

from .._lib import MagiError, lib
from ..region import Region, _dumps, load_buffers, load_many, plan_tables

__all__ = ["RuntimePlan", "compare_plans", "dynamo_param_name", "buffer_name"]


def dynamo_param_name(fqn):
    """The placeholder target Dynamo gives a module parameter/buffer
    reached from `self` ("layers.0.wq" -> "L_self_modules_layers_modules_0_parameters_wq_")."""
    parts = fqn.split(".")
    mods = "".join("modules_%s_" % p for p in parts[:-1])
    return "L_self_%sparameters_%s_" % (mods, parts[-1])


def buffer_name(fqn):
    """The placeholder target Dynamo gives a module buffer reached from `self`."""
    parts = fqn.split(".")
    mods = "".join("modules_%s_" % p for p in parts[:-1])
    return "L_self_%sbuffers_%s_" % (mods, parts[-1])


def _transport_of(items):
    """The runtime's transport: nccl only for regions loaded with nccl asked
    for (the option or their compile_config); a region whose nccl was only
    the load's default, a path or a document, runs copy_engine."""
    kinds = {r.transport for r in items if isinstance(r, Region) and getattr(r, "transport", None)
             and getattr(r, "transport_source", None) != "default"}
    if len(kinds) > 1:
        raise MagiError(-1, "SymmRuntime: regions loaded with different transports %s: "
                        "give one runtime regions of one transport" % sorted(kinds))
    return kinds.pop() if kinds else "copy_engine"


class RuntimePlan:
    """regions   the Regions the runtime runs (rank-local, lowered, rewritten)
    loaded    their LoadedSet (the C loader and its plan)
    adopted   True when the caller's load was bound as it stands
    transport "copy_engine" or "nccl" (the regions')
    windows, slots, plan_sha256, encoding (canonical bytes), slot_of {weight: slot}"""

    def __init__(self, regions, adopted, transport):
        self.regions = regions
        self.loaded = regions[0].loaded if regions else None
        self.adopted = adopted
        self.transport = transport
        self.ptr = self.loaded.plan if self.loaded is not None else c_void_p()
        self.windows, self.slots, self.plan_sha256 = plan_tables(self.ptr)
        p, ln = c_void_p(), ctypes.c_size_t()
        lib.magi_symm_plan_encode(byref(p), byref(ln), self.ptr)
        try:
            self.encoding = ctypes.string_at(p, ln.value)
        finally:
            lib.magi_free(p)
        self.slot_of = {sl["weight"]: i for i, sl in enumerate(self.slots)}
        self._transforms = None  # weight -> bind_transform, made on first use

    @classmethod
    def open(cls, items, *, rank, world, keep_cast_pad, window_cap_bytes, cross_host_groups=()):
        items = list(items)
        if not items:
            raise MagiError(-1, "SymmRuntime: no regions given")
        transport = _transport_of(items)
        first = items[0].loaded if isinstance(items[0], Region) else None
        if (first is not None and all(isinstance(r, Region) and r.loaded is first for r in items)
                and sorted(r.loaded_index for r in items) == list(range(first.count))
                and first.serves(rank=rank, world=world, keep_cast_pad=keep_cast_pad,
                                 window_cap_bytes=window_cap_bytes, cross_host_groups=cross_host_groups)):
            return cls(sorted(items, key=lambda r: r.loaded_index), True, transport)
        opts = dict(transport=transport, window_cap_bytes=window_cap_bytes, rank=rank, world=world,
                    rank_local=True, keep_cast_pad=keep_cast_pad, cross_host_groups=cross_host_groups)
        if all(not isinstance(r, Region) for r in items):
            fresh = load_many([os.fspath(r) for r in items], **opts)
            for r, path in zip(fresh, items):
                r.source = path
            return cls(fresh, False, transport)
        datas, names = [], []
        for i, r in enumerate(items):
            if isinstance(r, Region):
                datas.append(_dumps(r.doc).encode("utf-8"))
                names.append("region %d (%s)" % (i, r.path or r.model_tag))
            else:
                with open(os.fspath(r), "rb") as fh:
                    datas.append(fh.read())
                names.append(os.fspath(r))
        fresh = load_buffers(datas, names, **opts)
        for r, old in zip(fresh, items):
            r.source = old
            r.path = old.path if isinstance(old, Region) else os.fspath(old)
        return cls(fresh, False, transport)

    def slot_for(self, name):
        """Slot index of a weight given by slot weight name, placeholder
        name or module FQN; None when it has no slot."""
        so = self.slot_of
        if name in so:
            return so[name]
        for cand in (dynamo_param_name(name), buffer_name(name)):
            if cand in so:
                return so[cand]
        for r in self.regions:
            for p in r.placeholders:
                if p["name"] == name and p["target"] in so:
                    return so[p["target"]]
        return None

    def bind_transform(self, weight):
        """The "bind_transform" member ({"dtype", "rows"}) of the weight's
        placeholder when the lowering folded its cast or pad into the bound
        shard (magi_aot/lower.h), else None."""
        if self._transforms is None:  # read off the regions once
            self._transforms = {}
            for r in self.regions:
                for p in r.placeholders:
                    bt = (p["example_value"] or {}).get("bind_transform")
                    if bt:
                        self._transforms[p["target"]] = bt
        return self._transforms.get(weight)


def compare_plans(plans):
    """Every rank compares every plan ((digest, encoding) of each rank)
    with rank 0's: the same verdict, and the same message, on every rank."""
    d0, e0 = plans[0]
    for r, (d, e) in enumerate(plans[1:], 1):
        if d == d0:
            continue
        try:
            lib.magi_symm_plan_compare(e0, len(e0), e, len(e))
            why = "encodings differ"
        except MagiError as err:
            why = err.message
        raise MagiError(-11, "rank %d planned different windows than rank 0 (plan %s vs %s): "
                        "%s" % (r, d0.decode()[:16], d.decode()[:16], why))
