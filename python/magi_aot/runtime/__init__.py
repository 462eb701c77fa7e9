"""SymmRuntime: run loaded regions whose weight gathers use the SymmBuffer.

    import torch.distributed as dist, magi_aot
    from magi_aot.runtime import SymmRuntime
    dist.init_process_group("gloo")                      # torchrun's environment
    regions = magi_aot.load_many(["fsdp.magi"], transport="copy_engine",
                                 rank=dist.get_rank(), world=dist.get_world_size())
    rt = SymmRuntime(regions, device="cpu",              # "cuda:N": the cuda backend
                     groups={"0": [[0, 1, 2, 3]], "1": [[0, 1], [2, 3]]})
    rt.bind(local_weights)            # copy mode: shards copied into the windows
    # or: views = rt.alias()          # alias mode: the parameters live in the windows
    rt.ready()                        # collective: every rank has bound
    gm = rt.graph_module(regions[0])  # rebuilt, rank-local, kept gathers on rt's groups
    out = gm(*rt.args(regions[0], {"x": x}))
    fn, rep = rt.compile(regions[0], cache_dir)   # Inductor once; later processes load it
    out = fn(*rt.args(regions[0], {"x": x}))

A runtime is four parts, each with one job:

1. The plan (runtime/plan.py): the regions as this rank runs them and the
   plan of their windows, from one C load. Regions of a rank-local
   copy-engine load for this rank (as above) are bound as loaded: their
   loader's plan is the runtime's, nothing is loaded, lowered or planned
   again. Other regions or paths are loaded once, for this rank, by the C
   loader (the rank-local form, the lowering of DTensor weight gathers, one
   plan over all of them: one slot per weight shared by every region, one
   window per (dtype, group)).
   Before it, every rank's host is exchanged over the store
   (runtime/hosts.py): a group whose members span hosts is planned with
   its gathers on NCCL (reason "cross_host").
2. The groups (runtime/groups.py): explicit member ranks for every
   process-group name the graphs record, torch process groups for them,
   and the gathers kept on c10d pointed at the caller's block.
3. The rendezvous (runtime/rendezvous.py): every rank's plan compared over
   the store, a private directory for the C backend's own handshake, the
   backend created and met.
4. Binding and gathering (runtime/binding.py, runtime/gather.py): the
   shards into the windows (bind, alias) where the operator kernels find
   them, and the Python kernels' gather entry.

Compiled code (runtime/compiled.py, compile()): the scheduled region
compiled by Inductor once and stored under a key of everything the code
depends on; a later process with the same key loads it without Inductor.

Thread safety: one lock per runtime around the backend (a backend handle is
single-threaded). close() (or the with-block, or collecting the runtime)
releases the windows: the backend is freed at once unless tensors from
alias() still view its windows, else when the last of them goes (they stay
readable and writable; the operators no longer gather them).
"""
from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union, cast

from . import ops
from .._lib import MagiError, lib
from .binding import Binder
from .gather import Gatherer, _GatherWork, _register_work, drop_unread_gathers  # noqa: F401 - tests reach them here
from ..region import Region, load
from .groups import (collective_groups, host_staged_all_gather, host_staged_all_gather_coalesced,  # noqa: F401
                     make_c10d_groups, mesh_layout, remap_groups, resolve_groups)
from .hosts import cross_host_groups, exchange_hosts
from .plan import RuntimePlan, dynamo_param_name
from .rendezvous import Handles, _Store, rendezvous, rendezvous_prefix
from ..schedule import graph_facts, schedule_region
from .compiled import compile_region_code
from .overlap import agree

if TYPE_CHECKING:
    import os

    import torch

    # A region of the runtime: its index, or the Region (as given or as loaded here).
    RegionRef = Union[int, Region]

__all__ = ["SymmRuntime", "dynamo_param_name", "remap_groups", "host_staged_all_gather",
           "host_staged_all_gather_coalesced"]

_collective_groups = collective_groups  # the name the profiler's tests use
_rendezvous_prefix = rendezvous_prefix


class _State:
    """What the parts of one runtime share: the plan, the backend handle
    (hot path; owned by `handles`), the device, the lock, the closed flag.
    It refers to no part and not to the runtime (no reference cycles: the
    runtime and its windows go when their last reference does)."""
    __slots__ = ("plan", "handles", "b", "device", "lock", "closed")
    plan: Optional[RuntimePlan]
    handles: Optional[Handles]
    b: Any  # the C backend handle
    device: torch.device
    lock: threading.Lock
    closed: bool


class SymmRuntime:
    """The SymmBuffer of one rank for a set of loaded regions.

    regions    the Regions of one load (magi_aot.load_many(paths,
               transport="copy_engine", rank=, world=): bound as loaded),
               other Regions or paths (loaded once here, for this rank);
               planned together (shared slots)
    device     "cpu" (host backend, shared memory) or a CUDA device (cuda
               backend, IPC windows, copy-engine gathers); default: "cpu"
    groups     {graph group name: [[ranks], ...] partition, or [ranks] of the
               caller's group}; default: consecutive blocks
    store      a torch.distributed Store (default: the default group's);
               rank/world default to torch.distributed's
    timeout    seconds for every rendezvous step (store waits, C backend)
    window_cap_bytes  the planner's window cap (0: the library default)
    rendezvous_base   where rank 0 creates the private rendezvous directory
               (default /dev/shm for the host backend, else the temp dir);
               it is removed on success and on failure
    job        key prefix in the store (also of the hosts' exchange:
               runtime/hosts.py; a group whose members span hosts keeps its
               gathers on NCCL, reason "cross_host")
    new_groups create torch process groups for the graph's group names
               (default: when torch.distributed is initialised and world > 1)
    join       where a CUDA gather's consumer waits for it (docs/SYMM.md,
               "When the consumer waits"): "wait" (default) at
               `_c10d_functional.wait_tensor` on the output, as for torch's
               own functional collectives: the copies run on the runtime's
               gather stream while the compute issued between the gather and
               its wait runs beside them; "call": the current stream waits
               at the call (nothing overlaps it). The host backend's gathers
               are complete when the call returns, either way.
    keep_cast_pad  a SimpleFSDP region's lowered gathers keep their cast and
               pad in the graph, on NCCL (as traced); default False: a
               static weight is cast and padded once, at bind, and its
               gather leaves NCCL (docs/SYMM.md, "DTensor regions")
    schedule   the overlap schedule of every region before anything
               compiles or runs it (runtime/overlap.py: agreed by every
               rank over the store): "auto" (default: the analytical cost
               model), a measured cost table's path, or False (the graphs
               as loaded). graph_module() returns the scheduled graph and
               schedule_report says what was done
    max_inflight_bytes  the schedule's memory bound: 0 (default) two
               sets' worth (the gathers in use and the next), None no bound, else bytes

    Attributes: regions, plan (RuntimePlan: .adopted says whether the
    caller's load was bound as it stands), windows, slots, plan_sha256,
    transport, groups, partitions, c10d_group_names, host_staged_groups,
    hosts (every rank's host identity), cross_host_groups,
    job_id, rank, world, device, join, closed, schedule_report ({"mode":
    "identical" | "pinned" | "abort" | "off", "reason", "regions": [per
    region: magi_aot.schedule's report]}).
    """

    def __init__(self, regions: Iterable[Union[Region, str, os.PathLike[str]]], *,
                 device: Union[str, torch.device] = "cpu",
                 groups: Optional[Mapping[str, List[Any]]] = None, store: Any = None,
                 rank: Optional[int] = None, world: Optional[int] = None, timeout: float = 60.0,
                 job: str = "magi_symm", new_groups: Optional[bool] = None, window_cap_bytes: int = 0,
                 rendezvous_base: Optional[str] = None, join: str = "wait", keep_cast_pad: bool = False,
                 schedule: Union[str, bool, None] = "auto", max_inflight_bytes: Optional[int] = 0) -> None:
        import torch
        import torch.distributed as dist
        self.closed = True  # until the backend exists
        st = self._state = _State()
        st.closed, st.b, st.plan, st.handles = True, None, None, None
        st.lock = threading.Lock()
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type not in ("cpu", "cuda"):
            raise MagiError(-1, "SymmRuntime: device %s: only cpu (host backend) and cuda" % device)
        st.device = self.device
        self.backend_name = "host" if self.device.type == "cpu" else "cuda"
        if rank is None or world is None:
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank() if rank is None else rank
                world = dist.get_world_size() if world is None else world
            else:
                rank, world = (rank or 0), (world or 1)
        self.rank, self.world = int(rank), int(world)
        if join not in ("wait", "call"):
            raise MagiError(-1, "SymmRuntime: join must be 'wait' or 'call', not %r" % (join,))
        self.join = join
        self.keep_cast_pad = bool(keep_cast_pad)
        self.timeout = float(timeout)
        self._gatherer = Gatherer(st, join)
        self._binder = Binder(st, weakref.ref(self))
        try:
            if store is None and self.world > 1:
                if not (dist.is_available() and dist.is_initialized()):
                    raise MagiError(-1, "SymmRuntime: world %d needs a store: initialise "
                                    "torch.distributed (torchrun) or pass store=" % self.world)
                store = dist.distributed_c10d._get_default_store()
            self.store = store
            # which groups span hosts: known before the plan, which keeps them on NCCL
            # (the groups checked first: a bad `groups` fails alone, before any exchange)
            regions = list(regions)
            given = [r if isinstance(r, Region) else load(r) for r in regions]
            mine_of, parts = resolve_groups([r.doc for r in given], [], self.rank, self.world, groups,
                                            mesh_layout(given))
            self.hosts = exchange_hosts(store, self.rank, self.world, job, self.timeout)
            self.cross_host_groups = cross_host_groups(mine_of, parts, self.hosts)
            plan = st.plan = RuntimePlan.open(regions, rank=self.rank, world=self.world,
                                              keep_cast_pad=self.keep_cast_pad,
                                              window_cap_bytes=window_cap_bytes,
                                              cross_host_groups=self.cross_host_groups)
            st.handles = Handles(plan.loaded)
            self.groups, self.partitions = resolve_groups([r.doc for r in plan.regions], plan.windows,
                                                          self.rank, self.world, groups,
                                                          mesh_layout(plan.regions))
            if new_groups is None:
                new_groups = self.world > 1 and dist.is_available() and dist.is_initialized()
            self._c10d_groups, self.c10d_group_names = (
                make_c10d_groups(self.groups, self.partitions, self.rank) if new_groups else ({}, {}))
            # device tensors on a gloo group: gathers staged through the host
            self.host_staged_groups: set = set()
            if self.device.type == "cuda":
                for name, pg in self._c10d_groups.items():
                    if "gloo" in str(dist.get_backend(pg)).lower():
                        self.host_staged_groups.add(name)
            self.job_id = rendezvous(st.handles, plan, self.groups, store=store, rank=self.rank,
                                     world=self.world, job=job, timeout=self.timeout,
                                     backend_name=self.backend_name, device_index=self.device.index or 0,
                                     base=rendezvous_base, hosts=self.hosts)
            st.b = st.handles.b
            self._scheduled: Dict[int, Region] = {}
            self.schedule_report = self._schedule(schedule, max_inflight_bytes, store)
            self._binder.ops_h = ops.attach(self)
        except BaseException:
            self._free()
            raise
        self.closed = st.closed = False

    # ------------------------------------------------------------ the schedule
    def _schedule(self, schedule: Union[str, bool, None], max_inflight_bytes: Optional[int],
                  store: Any) -> Dict[str, Any]:
        """Schedule every region (runtime/overlap.py); their scheduled
        forms serve graph_module(). Collective over the store."""
        if schedule is False or schedule is None:
            return {"mode": "off", "reason": "schedule=False", "regions": []}
        costs = None if schedule in ("auto", True) else cast("Union[str, os.PathLike[str]]", schedule)
        facts = [graph_facts(r.doc) for r in self.regions]
        keys = [f["keys"] for f in facts]
        mine = {"fingerprints": [f["fingerprint"] for f in facts],
                "skeletons": [f["skeleton"] for f in facts],
                "keys": None if None in keys else keys}
        waits = _Store(store, self.rank, self.world, self.timeout) if self.world > 1 else None
        verdict = agree(waits, store, self.job_id or "", self.rank, self.world, mine)
        out: Dict[str, Any] = {"mode": verdict["mode"], "reason": verdict["reason"], "regions": []}
        if verdict["mode"] == "abort":
            return out
        if costs is not None and not verdict["same_keys"]:
            out["reason"] = ((out["reason"] + "; ") if out["reason"] else "") + \
                "the ranks' cost keys differ: the analytical model, not %s" % costs
            costs = None
        for i, region in enumerate(self.regions):
            sched, rep = schedule_region(region, costs=costs, max_inflight_bytes=max_inflight_bytes)
            self._scheduled[i] = sched
            out["regions"].append(rep)
        return out

    # ------------------------------------------------------------ the plan
    @property
    def plan(self) -> Optional[RuntimePlan]:
        return self._state.plan

    @property
    def regions(self) -> List[Region]:
        return self._plan_open().regions

    @property
    def windows(self) -> List[Dict[str, Any]]:
        return self._plan_open().windows

    @property
    def slots(self) -> List[Dict[str, Any]]:
        return self._plan_open().slots

    @property
    def plan_sha256(self) -> str:
        return self._plan_open().plan_sha256

    @property
    def transport(self) -> str:
        return self._plan_open().transport

    def _plan_open(self) -> RuntimePlan:
        # set while the runtime is built, before anything reads it
        return cast(RuntimePlan, self._state.plan)

    @property
    def _slot_of(self) -> Dict[str, int]:
        return self._plan_open().slot_of

    def _slot_for(self, name: str) -> Optional[int]:
        return self._plan_open().slot_for(name)

    # What the operator kernels read (magi_aot.runtime.ops): the backend and plan
    # handles, the Python kernels' gather entry and the registry's lookup.
    @property
    def _b(self) -> Any:
        return self._state.b

    @property
    def _plan(self) -> Any:
        p = self._state.plan
        return p.ptr if p is not None else None

    def _gather(self, slots: List[int], inputs: List[Any], group_size: int) -> Any:
        return self._gatherer.gather(slots, inputs, group_size)

    def _slot_equals(self, slot: int, t: Any) -> bool:
        return self._binder.slot_equals(slot, t)

    # ------------------------------------------------------------- binding
    def _check_open(self) -> None:
        if self.closed:
            raise MagiError(-1, "SymmRuntime is closed")

    def bind(self, shards: Mapping[str, Any], *, strict: bool = True) -> Dict[str, torch.Tensor]:
        """Copy mode: copy each rank-local shard into its slot (shards: dict
        name -> tensor, names as slot weights, placeholder names or module
        FQNs; DTensors give their local tensor). Tensors without a slot
        (gathers kept on c10d, activations' constants) are kept as plain
        inputs for args(). strict: every slot must be given. Returns
        {slot weight: tensor} of the bound tensors (the caller's own: the
        graph runs on them and the operators find the slot by their
        data_ptr; do not modify them afterwards without binding again)."""
        self._check_open()
        return self._binder.bind(shards, strict)

    def alias(self, shards: Optional[Mapping[str, Any]] = None) -> Dict[str, torch.Tensor]:
        """Alias mode: {slot weight: tensor that aliases the local slot}
        (nothing copied; the parameters live in the window, as MagiCompiler
        builds a model). Fill them in place (load_state_dict, copy_) before
        ready(). `shards` (optional) are copied in first, for convenience."""
        self._check_open()
        return self._binder.alias(shards)

    def ready(self) -> None:
        """Collective: return once every rank has bound (stream-ordered on
        cuda: every bind / alias write has landed). Call once before the
        first forward."""
        self._check_open()
        with self._state.lock:
            lib.magi_symm_backend_barrier(self._state.b, self._binder._stream())

    @property
    def stats(self) -> Dict[str, Any]:
        """{gather_calls, gathered_tensors, deferred_joins, host_seconds} of
        the operator calls that gathered through this runtime (by the C++
        or the Python kernels)."""
        out = dict(self._gatherer.stats)
        if self._binder.ops_h is not None:
            for k, v in ops.runtime_stats(self._binder.ops_h).items():
                out[k] += v
        return out

    # ------------------------------------------------------------ the graph
    def _region(self, region: RegionRef) -> Region:
        if isinstance(region, int):
            return self.regions[region]
        for loaded in self.regions:
            if loaded is region or loaded.source is region:
                return loaded
        raise MagiError(-14, "SymmRuntime: region %r is not one of the runtime's regions" % (region,))

    def graph_module(self, region: RegionRef = 0, *, scheduled: bool = True) -> torch.fx.GraphModule:
        """The region's GraphModule as this rank runs it: rank-local (DTensor
        placeholders are local shards), rewritten gathers on the magi
        operators, every c10d collective's group_name mapped to the
        caller's torch process group of that graph group, and its gathers
        launched where the runtime's schedule put them (scheduled=False:
        in the order as loaded); a copy-engine gather whose value nothing
        reads is left out (gather.drop_unread_gathers)."""
        loaded = self._region(region)
        idx = next((i for i, r in enumerate(self.regions) if r is loaded), None)
        gm = (self._scheduled.get(idx, loaded) if scheduled and idx is not None else loaded).graph_module()
        drop_unread_gathers(gm)
        if self.c10d_group_names:
            remap_groups(gm, self.c10d_group_names, self.host_staged_groups)
        return gm

    def compile(self, region: RegionRef = 0, cache_dir: Optional[Union[str, os.PathLike[str]]] = None, *,
                options: Optional[Dict[str, Any]] = None,
                trust_compiled: Optional[bool] = None) -> Tuple[Callable[..., List[Any]], Dict[str, Any]]:
        """The region compiled by Inductor as graph_module() gives it (the
        schedule's launch order kept: compile/launch_order.py), stored in
        `cache_dir` so that every later process with the same key loads the
        generated code instead of compiling (runtime/compiled.py: the key,
        the trust rules). Returns (fn, report): fn(*self.args(region,
        values)) -> [outputs]; report["served"] is "stored" or "compiled"
        and report["reason"] says why no stored code served. options:
        Inductor options (part of the key); trust_compiled: load an entry
        whoever wrote it (compile.code's rule). Not collective; not to be
        run beside another Inductor compile of this process."""
        self._check_open()
        return compile_region_code(self, region, cache_dir, options=options,
                                   trust_compiled=trust_compiled)

    def fake_inputs(self, region: RegionRef = 0, fake_mode: Any = None) -> List[Any]:
        """FakeTensors of the rank-local region (Inductor compiles from them)."""
        return self._region(region).fake_inputs(fake_mode, device=self.device)

    def args(self, region: RegionRef = 0, values: Optional[Mapping[str, Any]] = None) -> List[Any]:
        """The placeholder values of `region` in graph order: bound weights
        (bind/alias), plain weights given to bind(), then `values` (by
        placeholder name, target or FQN); SymInt placeholders are solved
        from the tensors' shapes where the saved shape names the symbol.
        A Python number given for a 0-d tensor placeholder (Dynamo's lifted
        float module attributes under dynamic=True, e.g. RMSNorm's eps)
        becomes that tensor (its recorded dtype). Refused with a MagiError
        naming the placeholder: a value for a weight bound to a slot (bind
        or alias it again instead), a DTensor where the rank-local region
        takes the local tensor, another type where a tensor is taken, and
        a tensor whose rank or static sizes differ from the region's (the
        dimension, recorded and given sizes)."""
        return self._binder.args(self._region(region), values)

    # -------------------------------------------------------------- teardown
    def _free(self) -> None:
        st = self._state
        ops.REGISTRY.remove_runtime(self)
        if self._binder.ops_h is not None:
            # unregistered, queued copies waited for: before the windows go
            h, self._binder.ops_h = self._binder.ops_h, None
            for k, v in ops.detach(h).items():
                self._gatherer.stats[k] += v
        self._gatherer.synchronize()
        # the runtime's reference to the backend and the load: they are
        # freed here unless a window view (alias()) still holds them, else
        # with the last such view
        st.b = None
        st.handles = None

    def close(self) -> None:
        """Release the windows (not collective: the C backend meets the
        peers where it needs to). Idempotent. Tensors from alias() (and
        views of them) stay valid memory: they keep the windows mapped
        until the last of them goes; the operators no longer gather them."""
        with self._state.lock:
            self.closed = self._state.closed = True
            self._free()
            self._binder.clear()

    def __enter__(self) -> SymmRuntime:
        return self

    def __exit__(self, *a: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self.closed:
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
