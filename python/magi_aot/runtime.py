"""SymmRuntime: run loaded regions whose weight gathers use the SymmBuffer.

    import torch.distributed as dist, magi_aot
    from magi_aot.runtime import SymmRuntime
    dist.init_process_group("gloo")                      # torchrun's environment
    region = magi_aot.load("fsdp.magi", transport="copy_engine")
    rt = SymmRuntime([region], device="cpu",             # "cuda:N": the cuda backend
                     groups={"0": [[0, 1, 2, 3]], "1": [[0, 1], [2, 3]]})
    rt.bind(local_weights)            # copy mode: shards copied into the windows
    # or: views = rt.alias()          # alias mode: the parameters live in the windows
    rt.ready()                        # collective: every rank has bound
    gm = rt.graph_module(region)      # rebuilt, rank-local, kept gathers on rt's groups
    out = gm(*rt.args(region, {"x": x}))

What one runtime does, in order:

1. Localises every region (magi_aot.rebuild.localize: DTensor placeholders
   become their local shards, Dynamo's function-local `to_local` helper
   becomes magi_aot.rebuild.to_local) and plans the windows of all of them
   through the library loader (magi_loader_load_buffers with the regions'
   transport, copy_engine unless they were loaded with nccl: one plan over
   all regions, one slot per weight
   shared by every region, one window per (dtype, group)).
2. Groups: every process-group name the graphs record gets explicit member
   ranks. `groups` maps a name to a partition of the world (a list of rank
   lists; each rank belongs to one of them) or to the one list of the
   caller's members; the default is blocks of consecutive ranks of the
   size the graph records. The same partition creates one torch process
   group per block (dist.new_group, collective), and gathers that stay on
   c10d (cast, padded, `transport="nccl"` regions) are re-pointed at the
   caller's block (graph_module() rewrites their group_name).
3. Rendezvous over torch.distributed's store (the default group's store, or
   `store=` a TCPStore/FileStore with `rank=`/`world=`): every rank
   publishes its plan digest and canonical encoding; every rank compares
   every plan with rank 0's and, on a difference, every rank raises the same
   MagiError MAGI_ERR_MISMATCH naming the rank and the first difference
   (magi_symm_plan_compare); a rank that does not publish within `timeout`
   seconds is named in a MAGI_ERR_TIMEOUT; a value that is no plan is a
   MAGI_ERR_FORMAT naming the rank and the key. Rank 0 also creates a fresh
   private directory and publishes its name; every rank accepts only a
   directory directly under the rendezvous base whose name carries the
   job's prefix (magi-symm-<hash of the key prefix>-), not a symlink, the
   user's, mode 0700 (else MAGI_ERR_FORMAT naming the rank and the key):
   the C backend then runs its own
   rendezvous in it (host: shared-memory window files; cuda: a Unix socket
   that exchanges the CUDA IPC handles), which checks the plans once more.
   Keys live under "<job>/<n>/", n counting this rank's runtimes in the
   store, so several runtimes in one job do not collide; that prefix is
   also the backend's job_id, so ranks of another job in the directory are
   refused by the C handshake.
4. bind() / alias() register the bound tensors where the operator kernels
   find them (see magi_aot.ops): with the extension's runtime over this
   backend under the C++ kernels, in magi_aot.ops.REGISTRY under the
   Python ones.

Thread safety: one lock per runtime around the backend (a backend handle is
single-threaded). close() (or the with-block, or collecting the runtime)
releases the windows: the backend is freed at once unless tensors from
alias() still view its windows, else when the last of them goes (they stay
readable and writable; the operators no longer gather them).
"""
import ctypes
import datetime
import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import weakref
from ctypes import byref, c_uint8, c_uint32, c_uint64, c_void_p

from . import ops
from .optable import classify
from ._lib import MagiError, SymmBackendConfig, SymmGroup, cstr, lib, struct_version
from .region import Region, _dumps

__all__ = ["SymmRuntime", "dynamo_param_name"]

_STORE_COUNTER = "%s/runtimes/%d"
_DIGEST_HEX = re.compile(rb"[0-9a-f]{64}")


def _rendezvous_prefix(job_id):
    """The name prefix of rank 0's rendezvous directory for the job whose
    store keys start with `job_id`: the peers accept no other name."""
    return "magi-symm-%s-" % hashlib.sha256(job_id.encode()).hexdigest()[:16]


def _n_lowered(ld, i):
    from ._lib import LoadedInfo
    info = LoadedInfo()
    lib.magi_loader_info(byref(info), ld, i)
    return info.n_lowered


def dynamo_param_name(fqn):
    """The placeholder target Dynamo gives a module parameter/buffer
    reached from `self` ("layers.0.wq" -> "L_self_modules_layers_modules_0_parameters_wq_")."""
    parts = fqn.split(".")
    mods = "".join("modules_%s_" % p for p in parts[:-1])
    return "L_self_%sparameters_%s_" % (mods, parts[-1])


def _buffer_name(fqn):
    parts = fqn.split(".")
    mods = "".join("modules_%s_" % p for p in parts[:-1])
    return "L_self_%sbuffers_%s_" % (mods, parts[-1])


class _Handles:
    """The backend and the loader (whose plan the backend borrows) of one
    runtime, freed together when the last reference goes. The runtime holds
    one until close(); every window view holds one through its storage
    (the host backend's ctypes array, the cuda backend's _CudaArray), so a
    tensor from alias() keeps the windows mapped after close() or after the
    runtime is collected, and the windows go with the last view."""
    __slots__ = ("b", "loader")

    def __init__(self):
        self.b = None
        self.loader = None

    def __del__(self):
        try:
            if self.b:
                lib.magi_symm_backend_free(self.b)
            if self.loader:
                lib.magi_loader_free(self.loader)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
        self.b = self.loader = None


class _CudaArray:
    """A device pointer as __cuda_array_interface__ bytes (torch.as_tensor
    keeps this object, and so `owner`, alive with the tensor)."""

    def __init__(self, ptr, nbytes, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2, "strides": None}


def _dtype_of(torch, name):
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise MagiError(-4, "unknown dtype '%s' in the plan" % name)
    return dt


def _collective_groups(docs):
    """{group name: group size} of every c10d collective / symm gather the
    graphs record (args named group_size / group_name of the op schemas)."""
    out = {}
    for doc in docs:
        for n in doc["graph"]["nodes"]:
            t = n.get("target") or ""
            if n.get("op") != "call_function":
                continue
            cls = classify("call_function", t)  # the library's operator table
            if cls not in ("gather", "symm_gather", "collective"):
                continue
            a = n.get("args") or []
            kw = n.get("kwargs") or {}
            if cls != "collective" and len(a) >= 3 and isinstance(a[1], int) and isinstance(a[2], str):
                out.setdefault(a[2], a[1])
            elif isinstance(kw.get("group_name"), str) and isinstance(kw.get("group_size"), int):
                out.setdefault(kw["group_name"], kw["group_size"])
    return out


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


class SymmRuntime:
    """The SymmBuffer of one rank for a set of loaded regions.

    regions    Region objects (magi_aot.load(..., transport="copy_engine"))
               or paths; planned together (shared slots)
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
    job        key prefix in the store
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
    """

    def __init__(self, regions, *, device="cpu", groups=None, store=None, rank=None, world=None,
                 timeout=60.0, job="magi_symm", new_groups=None, window_cap_bytes=0,
                 rendezvous_base=None, join="wait", keep_cast_pad=False):
        import torch
        import torch.distributed as dist
        from .rebuild import localize
        self.closed = True  # until the backend exists
        self._lock = threading.Lock()
        self._b = None       # the backend handle (hot path); owned by self._handles
        self._plan = None
        self._handles = _Handles()
        self._ops_h = None   # the C++ kernels' runtime over the backend (magi_aot.ops.attach)
        self.device = torch.device(device)
        self.backend_name = "host" if self.device.type == "cpu" else "cuda"
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type not in ("cpu", "cuda"):
            raise MagiError(-1, "SymmRuntime: device %s: only cpu (host backend) and cuda" % device)
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
        self._gather_stream = None  # the cuda gathers' stream (join="wait"), made on first use
        self._reg_work = None       # torch's _register_work, looked up on first use
        self.timeout = float(timeout)
        self._rdzv_base = rendezvous_base
        loaded = [r if isinstance(r, Region) else _load(r) for r in regions]
        self.regions = [localize(r) for r in loaded]
        self._stats = {"gather_calls": 0, "gathered_tensors": 0, "host_seconds": 0.0, "deferred_joins": 0}
        self._fn_gather = lib.magi_symm_all_gather          # bound once: the hot path
        self._fn_gather_n = lib.magi_symm_all_gather_coalesced
        try:
            self._plan_regions(window_cap_bytes)
            self._resolve_groups(groups)
            if store is None and self.world > 1:
                if not (dist.is_available() and dist.is_initialized()):
                    raise MagiError(-1, "SymmRuntime: world %d needs a store: initialise "
                                    "torch.distributed (torchrun) or pass store=" % self.world)
                store = dist.distributed_c10d._get_default_store()
            self.store = store
            if new_groups is None:
                new_groups = self.world > 1 and dist.is_available() and dist.is_initialized()
            self._c10d_groups = {}
            self.c10d_group_names = self._make_c10d_groups() if new_groups else {}
            # device tensors on a gloo group: gathers staged through the host
            self.host_staged_groups = set()
            if self.device.type == "cuda":
                for name, pg in self._c10d_groups.items():
                    if "gloo" in str(dist.get_backend(pg)).lower():
                        self.host_staged_groups.add(name)
            self._rendezvous(job)
            self._ops_h = ops.attach(self)
        except BaseException:
            self._free()
            raise
        self.closed = False
        self._bound = {}     # weight -> tensor handed to the graph
        self._plain = {}     # weights without a slot (kept gathers), by name
        self._specs = {}     # (slot tuple, group size) -> _CallSpec

    # ------------------------------------------------------------ planning
    def _plan_regions(self, cap):
        """Plan every localised region through the library loader (one
        plan over all of them, transport copy_engine); the loader, and so
        the plan, live as long as the runtime."""
        from ._lib import LOAD_TRANSPORTS, LoaderOptions
        kinds = {r.transport for r in self.regions if getattr(r, "transport", None)}
        if len(kinds) > 1:
            raise MagiError(-1, "SymmRuntime: regions loaded with different transports %s: "
                            "give one runtime regions of one transport" % sorted(kinds))
        self.transport = kinds.pop() if kinds else "copy_engine"
        opts = LoaderOptions(transport=LOAD_TRANSPORTS[self.transport], window_cap_bytes=int(cap))
        # this rank's view: DTensor weight gathers are lowered for it in the loader
        opts.bind.rank, opts.bind.world = self.rank, self.world
        opts.keep_cast_pad = int(self.keep_cast_pad)
        ld = c_void_p()
        lib.magi_loader_new(byref(ld), byref(opts))
        self._handles.loader = ld
        texts = [_dumps(r.doc).encode("utf-8") for r in self.regions]
        bufs = [ctypes.create_string_buffer(t, len(t)) for t in texts]
        n = len(texts)
        names = [cstr("region %d (%s)" % (i, r.path or r.model_tag)) for i, r in enumerate(self.regions)]
        lib.magi_loader_load_buffers(ld, (c_void_p * n)(*[ctypes.cast(b, c_void_p) for b in bufs]),
                                     (ctypes.c_size_t * n)(*[len(t) for t in texts]),
                                     (ctypes.c_char_p * n)(*names), n)
        plan = lib.magi_loader_plan(ld)
        self._plan = c_void_p(plan)
        self._take_lowered(ld)
        n = c_uint32()
        w = lib.magi_symm_plan_windows(byref(n), plan)
        self.windows = [{"dtype": w[i].dtype.decode(), "group": w[i].group.decode(),
                         "group_size": w[i].group_size, "part": w[i].part, "bytes": w[i].bytes,
                         "first_slot": w[i].first_slot, "n_slots": w[i].n_slots}
                        for i in range(n.value)]
        s = lib.magi_symm_plan_slots(byref(n), plan)
        self.slots = [{"weight": s[i].weight.decode(), "window": s[i].window, "offset": s[i].offset,
                       "nbytes": s[i].nbytes, "shape": [s[i].shape[k] for k in range(s[i].ndim)]}
                      for i in range(n.value)]
        digest = (c_uint8 * 32)()
        lib.magi_symm_plan_digest(digest, plan)
        self.plan_sha256 = bytes(digest).hex()
        p, ln = c_void_p(), ctypes.c_size_t()
        lib.magi_symm_plan_encode(byref(p), byref(ln), plan)
        try:
            self._encoding = ctypes.string_at(p, ln.value)
        finally:
            lib.magi_free(p)
        self._slot_of = {sl["weight"]: i for i, sl in enumerate(self.slots)}

    def _take_lowered(self, ld):
        """Regions whose DTensor redistributes the loader lowered for this
        rank: the runtime runs the loader's graph (explicit gathers, local
        shards), read back from the C region once."""
        from .region import _regions_of
        if not any(lib.magi_loader_count(ld) and _n_lowered(ld, i) for i in range(len(self.regions))):
            return
        fresh = _regions_of(ld, time.perf_counter())
        for i, (old, new) in enumerate(zip(self.regions, fresh)):
            if new.n_lowered:
                new.source = getattr(old, "source", None) or old
                new.path = old.path
                self.regions[i] = new

    def _resolve_groups(self, groups):
        """self.groups: {name: ranks of the caller's block}; self.partitions:
        {name: every block} (None when only the caller's block is known)."""
        sizes = _collective_groups(r.doc for r in self.regions)
        for w in self.windows:
            sizes.setdefault(w["group"], w["group_size"])
        groups = dict(groups or {})
        self.groups, self.partitions = {}, {}
        for name, size in sorted(sizes.items()):
            spec = groups.pop(name, None)
            if spec is None:
                if size > self.world or self.world % size:
                    raise MagiError(-1, "group '%s' of size %d does not divide world %d: pass "
                                    "groups={'%s': [[ranks], ...]}" % (name, size, self.world, name))
                blocks = [list(range(b, b + size)) for b in range(0, self.world, size)]
            elif spec and all(isinstance(x, (list, tuple)) for x in spec):
                blocks = [list(map(int, b)) for b in spec]
            else:
                blocks = None
                mine = list(map(int, spec))
            if blocks is not None:
                seen = sorted(r for b in blocks for r in b)
                if seen != list(range(self.world)):
                    raise MagiError(-1, "group '%s': blocks %s are not a partition of ranks 0..%d"
                                    % (name, blocks, self.world - 1))
                mine = next(b for b in blocks if self.rank in b)
            if len(mine) != size:
                raise MagiError(-11, "group '%s': the graph records size %d, the members given "
                                "are %s" % (name, size, mine))
            if self.rank not in mine:
                raise MagiError(-1, "group '%s': members %s do not contain rank %d"
                                % (name, mine, self.rank))
            self.groups[name] = mine
            self.partitions[name] = blocks
        if groups:
            raise MagiError(-1, "groups %s are not used by the regions (they record %s)"
                            % (sorted(groups), sorted(sizes)))

    def _make_c10d_groups(self):
        """One torch process group per block of every group (collective, in
        name order on every rank); {graph name: the caller's c10d name}."""
        import torch.distributed as dist
        out = {}
        for name in sorted(self.groups):
            blocks = self.partitions[name]
            if blocks is None:
                raise MagiError(-1, "group '%s': give the whole partition ([[ranks], ...]) to "
                                "create its process groups, or new_groups=False" % name)
            for b in blocks:
                pg = dist.new_group(b)
                if self.rank in b:
                    self._c10d_groups[name] = pg
                    out[name] = pg.group_name
        return out

    # ----------------------------------------------------------- rendezvous
    def _rendezvous(self, job):
        self._tmp = None
        try:
            self._rendezvous_steps(job)
        finally:  # rank 0 (or a world of 1) owns the directory: gone on success or failure
            if self._tmp and (self.world == 1 or self.rank == 0):
                shutil.rmtree(self._tmp, ignore_errors=True)

    def _rendezvous_steps(self, job):
        store, rank, world = self.store, self.rank, self.world
        self.job_id = None
        if world > 1:
            n = store.add(_STORE_COUNTER % (job, rank), 1)
            pfx = "%s/%d/" % (job, n)
            self.job_id = pfx  # the same on every rank: the C handshake refuses other jobs
            store.set(pfx + "plan/%d" % rank, self.plan_sha256.encode() + b":" + self._encoding)
            if rank == 0:
                self._tmp = tempfile.mkdtemp(prefix=_rendezvous_prefix(pfx), dir=self._rendezvous_base())
                store.set(pfx + "dir", self._tmp)
            keys = [pfx + "plan/%d" % r for r in range(world)] + [pfx + "dir"]
            self._wait(keys, "publish its plan")
            plans = [self._plan_value(pfx + "plan/%d" % r, r) for r in range(world)]
            self._compare_plans(plans)
            rdzv = self._directory_value(pfx)
        else:
            rdzv = None if self.backend_name == "host" else tempfile.mkdtemp(prefix="magi-symm-")
            self._tmp = rdzv
        ops_ = lib.magi_symm_backend_find(self.backend_name.encode())
        if not ops_:
            raise MagiError(-13, lib.magi_last_error().decode())
        ranks = {}
        garr = (SymmGroup * max(1, len(self.groups)))()
        for i, (name, members) in enumerate(sorted(self.groups.items())):
            ranks[name] = (c_uint32 * len(members))(*members)
            garr[i] = SymmGroup(name.encode(), len(members), ranks[name], None)
        job_id = cstr(self.job_id) if self.job_id else None
        cfg = SymmBackendConfig(
            version=struct_version(SymmBackendConfig.REVISION, SymmBackendConfig),
            rank=self.rank, world=self.world, groups=garr, n_groups=len(self.groups),
            rendezvous=cstr(rdzv) if rdzv else None, timeout_ms=int(self.timeout * 1000),
            device=self.device.index or 0, world_comm=None, job_id=job_id)
        b = c_void_p()
        lib.magi_symm_backend_create(byref(b), ops_, self._plan, byref(cfg))
        self._handles.b = self._b = b
        lib.magi_symm_backend_rendezvous(b)
        if world > 1:
            store.add(pfx + "joined", 1)
            self._wait_count(pfx + "joined", "finish the backend rendezvous")

    def _rendezvous_base(self):
        """Where rank 0 creates the rendezvous directory (absolute)."""
        base = self._rdzv_base or ("/dev/shm" if self.backend_name == "host"
                                   and os.path.isdir("/dev/shm") else tempfile.gettempdir())
        return os.path.abspath(base)

    def _plan_value(self, key, r):
        """(digest, encoding) of rank r's plan as the store holds it, or a
        MagiError naming the rank and the key (the same on every rank)."""
        v = bytes(self.store.get(key))
        digest, sep, enc = v.partition(b":")
        if not sep or not enc or not _DIGEST_HEX.fullmatch(digest):
            raise MagiError(-4, "SymmRuntime: store key '%s' (rank %d's plan) is not "
                            "'<sha256 hex>:<plan encoding>' (%d bytes: %r)" % (key, r, len(v), v[:48]))
        return digest, enc

    def _directory_value(self, pfx):
        """The rendezvous directory the store names, accepted only as the
        fresh one rank 0 created: a direct child of the rendezvous base
        with the job's name prefix, a directory (no symlink) of this user,
        mode 0700; else a MagiError naming the rank and the key."""
        key = pfx + "dir"
        raw = bytes(self.store.get(key))
        what = "SymmRuntime rank %d: store key '%s' (rank 0's rendezvous directory)" % (self.rank, key)
        try:
            path = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MagiError(-4, "%s is not UTF-8 (%r)" % (what, raw[:80])) from None
        base = self._rendezvous_base()
        name = os.path.basename(path)
        if "\0" in path or os.path.dirname(path) != base or name in ("", ".", ".."):
            raise MagiError(-4, "%s: %r is not a directory directly under the rendezvous base %s"
                            % (what, path, base))
        prefix = _rendezvous_prefix(pfx)
        if not name.startswith(prefix):
            raise MagiError(-4, "%s: %r: its name does not start with %s (the job's)" % (what, path, prefix))
        try:
            st = os.lstat(path)
        except OSError as e:
            raise MagiError(-4, "%s: %r: %s" % (what, path, e.strerror)) from None
        why = None
        if stat.S_ISLNK(st.st_mode):
            why = "is a symbolic link"
        elif not stat.S_ISDIR(st.st_mode):
            why = "is not a directory"
        elif st.st_uid != os.geteuid():
            why = "is owned by uid %d, not %d" % (st.st_uid, os.geteuid())
        elif stat.S_IMODE(st.st_mode) != 0o700:
            why = "has mode %04o, not 0700" % stat.S_IMODE(st.st_mode)
        elif self.rank == 0 and path != self._tmp:
            why = "is not the directory rank 0 created (%s)" % self._tmp
        if why:
            raise MagiError(-4, "%s: %r %s" % (what, path, why))
        return path

    def _wait(self, keys, what):
        try:
            self.store.wait(keys, datetime.timedelta(seconds=self.timeout))
        except Exception as e:  # noqa: BLE001 - torch raises several types
            missing = [k for k in keys if not self._has(k)]
            # "<pfx>plan/<r>" is rank r's; "<pfx>dir" is rank 0's
            ranks = sorted({int(k.rsplit("/", 1)[-1]) if "/plan/" in k else 0 for k in missing})
            ranks = [str(r) for r in ranks]
            raise MagiError(-12, "SymmRuntime rank %d: rank(s) %s did not %s within %.0f s (%s)"
                            % (self.rank, ", ".join(ranks), what, self.timeout,
                               str(e).splitlines()[0] if str(e) else type(e).__name__)) from None

    def _has(self, key):
        try:
            return self.store.check([key])
        except Exception:  # noqa: BLE001
            return False

    def _wait_count(self, key, what):
        deadline = time.monotonic() + self.timeout
        while int(self.store.add(key, 0)) < self.world:
            if time.monotonic() > deadline:
                raise MagiError(-12, "SymmRuntime rank %d: not every rank did %s within %.0f s"
                                % (self.rank, what, self.timeout))
            time.sleep(0.005)

    def _compare_plans(self, plans):
        """Every rank compares every plan ((digest, encoding) of each rank)
        with rank 0's: the same verdict, and the same message, on every
        rank."""
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

    # --------------------------------------------------------------- binding
    def _slot_for(self, name):
        """Slot index of a weight given by slot weight name, placeholder
        name or module FQN; None when it has no slot."""
        if name in self._slot_of:
            return self._slot_of[name]
        for cand in (dynamo_param_name(name), _buffer_name(name)):
            if cand in self._slot_of:
                return self._slot_of[cand]
        for r in self.regions:
            for p in r.placeholders:
                if p["name"] == name and p["target"] in self._slot_of:
                    return self._slot_of[p["target"]]
        return None

    def _check_open(self):
        if self.closed:
            raise MagiError(-1, "SymmRuntime is closed")

    def _stream(self):
        if self.device.type != "cuda":
            return None
        import torch
        return c_void_p(torch.cuda.current_stream(self.device).cuda_stream)

    def _window_view(self, slot):
        """A uint8 tensor over the local slot (no copy), and the slot's
        dtype and shape over it. Its storage holds the runtime's _Handles:
        the window stays mapped while the tensor, or any view of it, lives."""
        import torch
        sl = self.slots[slot]
        p = c_void_p()
        lib.magi_symm_local_slot_ptr(byref(p), self._b, slot)
        if self.device.type == "cpu":
            buf = (ctypes.c_uint8 * sl["nbytes"]).from_address(p.value)
            buf.owner = self._handles  # torch.frombuffer keeps buf alive with the storage
            raw = torch.frombuffer(buf, dtype=torch.uint8)
        else:
            raw = torch.as_tensor(_CudaArray(p.value, sl["nbytes"], self._handles), device=self.device)
        win = self.windows[sl["window"]]
        return raw, raw.view(_dtype_of(torch, win["dtype"])).view(sl["shape"])

    def _slot_equals(self, slot, t):
        """Whether the local slot holds exactly t's bytes (the registry's
        lookup by value)."""
        import torch
        with self._lock:
            if self.closed:
                return False
            raw, _ = self._window_view(slot)
            if self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()
            mine = t.detach().contiguous().reshape(-1).view(torch.uint8)
            return mine.numel() == raw.numel() and bool(torch.equal(mine, raw.to(mine.device)))

    @property
    def stats(self):
        """{gather_calls, gathered_tensors, deferred_joins, host_seconds} of
        the operator calls that gathered through this runtime (by the C++
        or the Python kernels)."""
        out = dict(self._stats)
        if self._ops_h is not None:
            for k, v in ops.runtime_stats(self._ops_h).items():
                out[k] += v
        return out

    def _register(self, slot, t):
        if self._ops_h is not None:
            ops.bind_tensor(self._ops_h, slot, t)
            return
        win = self.windows[self.slots[slot]["window"]]
        ops.REGISTRY.add(self, t.device, t.data_ptr(), win["group"], slot, self.slots[slot]["nbytes"],
                         layout=ops._layout(t))

    def _local(self, t):
        if hasattr(t, "to_local") and callable(t.to_local):  # a DTensor parameter
            t = t.to_local()
        return t.detach() if hasattr(t, "detach") else t

    def bind(self, shards, *, strict=True):
        """Copy mode: copy each rank-local shard into its slot (shards: dict
        name -> tensor, names as slot weights, placeholder names or module
        FQNs; DTensors give their local tensor). Tensors without a slot
        (gathers kept on c10d, activations' constants) are kept as plain
        inputs for args(). strict: every slot must be given. Returns
        {slot weight: tensor} of the bound tensors (the caller's own: the
        graph runs on them and the operators find the slot by their
        data_ptr; do not modify them afterwards without binding again)."""
        import torch
        self._check_open()
        given = set()
        out = {}
        with self._lock:
            for name, t in shards.items():
                t, slot = self._shard_for(name, t, torch)
                if slot is None:
                    continue
                sl = self.slots[slot]
                src = t if t.is_contiguous() else t.contiguous()
                lib.magi_symm_bind(self._b, slot, c_void_p(src.data_ptr()), sl["nbytes"],
                                   self._stream())
                if src is not t and self.device.type == "cuda":
                    torch.cuda.current_stream(self.device).synchronize()
                self._register(slot, t)
                _, view = self._window_view(slot)
                self._register(slot, view)
                self._bound[sl["weight"]] = t
                out[sl["weight"]] = t
                given.add(slot)
        missing = [self.slots[i]["weight"] for i in range(len(self.slots))
                   if i not in given and self.slots[i]["weight"] not in self._bound]
        if strict and missing:
            raise MagiError(-14, "SymmRuntime.bind: no shard given for %s" % ", ".join(missing))
        return out

    def _shard_for(self, name, t, torch):
        """(local tensor, slot) of a shard given under `name`, checked
        against its slot; slot None when it has none (kept as a plain
        input for args())."""
        t = self._local(t)
        slot = self._slot_for(name)
        if slot is None:
            self._plain[name] = t
            return t, None
        sl = self.slots[slot]
        t = self._bind_transform(name, sl, t, torch)
        self._check_shard(name, sl, self.windows[sl["window"]], t, torch)
        return t, slot

    def _bind_transform(self, name, sl, t, torch):
        """A weight whose lowered gather casts or pads it (docs/SYMM.md,
        "at bind"): the caller gives its own shard, which is cast to the
        slot's dtype and padded with zero rows to the chunk here, once."""
        bt = None
        for r in self.regions:
            for p in r.placeholders:
                if p["target"] == sl["weight"]:
                    bt = (p["example_value"] or {}).get("bind_transform")
        if bt is None:
            return t
        want = _dtype_of(torch, bt["dtype"])
        rows = int(bt["rows"])
        if t.dtype != want or t.dim() != len(sl["shape"]) or t.shape[0] != rows or \
                list(t.shape[1:]) != list(sl["shape"][1:]):
            raise MagiError(-4, "SymmRuntime.bind: '%s' should be this rank's shard, %s of %d rows "
                            "x %s (it is cast and padded here, once); got %s %s"
                            % (name, bt["dtype"], rows, list(sl["shape"][1:]), str(t.dtype).replace("torch.", ""),
                               list(t.shape)))
        win = self.windows[sl["window"]]
        out = torch.zeros(sl["shape"], dtype=_dtype_of(torch, win["dtype"]), device=t.device)
        out[:rows].copy_(t)
        return out

    def _check_shard(self, name, sl, win, t, torch):
        want = _dtype_of(torch, win["dtype"])
        if t.dtype != want or list(t.shape) != sl["shape"] or t.device != self.device:
            raise MagiError(-11, "SymmRuntime.bind: '%s' (slot of %s, group '%s') is %s %s on %s; "
                            "the plan needs %s %s on %s" % (name, sl["weight"], win["group"], t.dtype,
                                                           list(t.shape), t.device, want, sl["shape"],
                                                           self.device))

    def alias(self, shards=None):
        """Alias mode: {slot weight: tensor that aliases the local slot}
        (nothing copied; the parameters live in the window, as MagiCompiler
        builds a model). Fill them in place (load_state_dict, copy_) before
        ready(). `shards` (optional) are copied in first, for convenience."""
        import torch
        self._check_open()
        out = {}
        with self._lock:
            for i, sl in enumerate(self.slots):
                _, view = self._window_view(i)
                self._register(i, view)
                self._bound[sl["weight"]] = view
                out[sl["weight"]] = view
        for name, t in (shards or {}).items():
            t, slot = self._shard_for(name, t, torch)
            if slot is not None:
                out[self.slots[slot]["weight"]].copy_(t)
        return out

    def ready(self):
        """Collective: return once every rank has bound (stream-ordered on
        cuda: every bind / alias write has landed). Call once before the
        first forward."""
        self._check_open()
        with self._lock:
            lib.magi_symm_backend_barrier(self._b, self._stream())

    # ---------------------------------------------------------------- gather
    def _gather(self, slots, inputs, group_size):
        """The operator kernels' entry (magi_aot.ops).

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
        self._check_open()
        spec = self._specs.get((tuple(slots), group_size))
        if spec is None or any(t.dtype is not dt or t.shape != shp for t, (dt, shp) in zip(inputs, spec.inputs)):
            spec = self._make_spec(slots, inputs, group_size)
        dev = self.device
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
        if reg is None and self.device.type == "cuda" and self.join == "wait":
            reg = self._reg_work = _register_work()
        deferred = self.device.type == "cuda" and self.join == "wait" and reg is not None
        with self._lock:
            if deferred:
                # the copies go on the gather stream, ordered after
                # everything the current stream holds (the output block's
                # earlier users); the block is recorded on the gather
                # stream, so the caching allocator never hands it out while
                # the copies may still write. Under the lock: another
                # thread's hand-off cannot land between this gather and
                # its completion event.
                cur = torch.cuda.current_stream(self.device)
                side = self._side_stream(torch)
                side.wait_stream(cur)
                block.record_stream(side)
                stream = c_void_p(side.cuda_stream)
            else:
                stream = self._stream()
            if spec.single:
                self._fn_gather(c_void_p(dsts[0]), sizes[0], self._b, slots[0], stream)
            else:
                n = len(outs)
                self._fn_gather_n((c_void_p * n)(*dsts), spec.c_sizes, self._b, n, spec.c_slots, stream)
            if deferred:
                done = torch.cuda.Event()
                done.record(side)
                work = _GatherWork.for_event(done, self.device)
                work.outs = [weakref.ref(o) for o in outs]
                for o in outs:
                    reg(o, work)
            st = self._stats
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
            sl = self.slots[slot]
            win = self.windows[sl["window"]]
            if group_size != win["group_size"]:
                raise MagiError(-11, "magi::symm_all_gather: group '%s' has size %d, the call says %d"
                                % (win["group"], win["group_size"], group_size))
            if t.device != self.device:
                raise MagiError(-1, "magi::symm_all_gather: input on %s, the SymmBuffer is on %s"
                                % (t.device, self.device))
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
            lib.magi_symm_output_layout(self._plan, n, spec.c_slots, offs, byref(total))
            spec.total = total.value
            for o, nb, t, shape in zip(offs, sizes, inputs, shapes):
                spec.outputs.append((o, nb, t.dtype, shape, _contiguous_strides(shape)))
        if len(self._specs) >= self._SPEC_CACHE:
            self._specs.clear()
        self._specs[(tuple(slots), group_size)] = spec
        return spec

    def _side_stream(self, torch):
        if self._gather_stream is None:
            self._gather_stream = torch.cuda.Stream(device=self.device)
        return self._gather_stream

    # ------------------------------------------------------------ the graph
    def _region(self, region):
        if isinstance(region, int):
            return self.regions[region]
        for loaded in self.regions:
            if loaded is region or loaded.source is region:
                return loaded
        raise MagiError(-14, "SymmRuntime: region %r is not one of the runtime's regions" % (region,))

    def graph_module(self, region=0):
        """The region's GraphModule as this rank runs it: localised (DTensor
        placeholders are local shards), rewritten gathers on the magi
        operators, and every c10d collective's group_name mapped to the
        caller's torch process group of that graph group."""
        gm = self._region(region).graph_module()
        if self.c10d_group_names:
            remap_groups(gm, self.c10d_group_names, self.host_staged_groups)
        return gm

    def fake_inputs(self, region=0, fake_mode=None):
        """FakeTensors of the localised region (Inductor compiles from them)."""
        return self._region(region).fake_inputs(fake_mode, device=self.device)

    def args(self, region=0, values=None):
        """The placeholder values of `region` in graph order: bound weights
        (bind/alias), plain weights given to bind(), then `values` (by
        placeholder name, target or FQN); SymInt placeholders are solved
        from the tensors' shapes where the saved shape names the symbol."""
        r = self._region(region)
        values = dict(values or {})
        out, syms, pending = [], {}, []
        for p in r.placeholders:
            v = _pick(values, p)
            if v is _MISSING and p["target"] in self._bound:
                v = self._bound[p["target"]]
            if v is _MISSING:
                v = _pick(self._plain, p)
            ex = p["example_value"] or {}
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

    # -------------------------------------------------------------- teardown
    def _free(self):
        ops.REGISTRY.remove_runtime(self)
        if self._ops_h is not None:
            # unregistered, queued copies waited for: before the windows go
            h, self._ops_h = self._ops_h, None
            for k, v in ops.detach(h).items():
                self._stats[k] += v
        if self._gather_stream is not None:
            # copies queued on the gather stream (join="wait") still read
            # the windows and write their outputs: done before the windows go
            self._gather_stream.synchronize()
        # the runtime's reference to the backend and loader: they are freed
        # here unless a window view (alias()) still holds them, else with
        # the last such view
        self._b = None
        self._plan = None  # the loader's
        self._handles = None

    def close(self):
        """Release the windows (not collective: the C backend meets the
        peers where it needs to). Idempotent. Tensors from alias() (and
        views of them) stay valid memory: they keep the windows mapped
        until the last of them goes; the operators no longer gather them."""
        with self._lock:
            self.closed = True
            self._free()
            self._bound, self._plain = {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def __del__(self):
        try:
            if not self.closed:
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


_MISSING = object()


def _pick(d, p):
    for k in (p["name"], p["target"]):
        if k in d:
            return d[k]
    for fqn, v in d.items():
        if p["target"] in (dynamo_param_name(fqn), _buffer_name(fqn), "L_%s_" % fqn):
            return v
    return _MISSING


def host_staged_all_gather(input, group_size, group_name):
    """`_c10d_functional.all_gather_into_tensor` of a device tensor on a
    process group that only moves host memory (gloo: its coalesced
    all-gather, which the functional op uses, reads data pointers as host
    memory): copy to the host, gather, wait, copy back. The graph's own
    wait_tensor on the result is then a no-op."""
    import torch
    f = torch.ops._c10d_functional
    out = f.wait_tensor(f.all_gather_into_tensor(input.cpu(), group_size, group_name))
    return out.to(input.device)


def host_staged_all_gather_coalesced(inputs, group_size, group_name):
    """The coalesced form of host_staged_all_gather."""
    import torch
    f = torch.ops._c10d_functional
    outs = f.all_gather_into_tensor_coalesced([t.cpu() for t in inputs], group_size, group_name)
    return [f.wait_tensor(o).to(t.device) for o, t in zip(outs, inputs)]


_HOST_STAGED = {"all_gather_into_tensor": host_staged_all_gather,
                "all_gather_into_tensor_coalesced": host_staged_all_gather_coalesced}


def remap_groups(gm, names, stage_on_host=()):
    """Rewrite the group_name argument of every c10d functional collective
    in `gm` through `names` (graph group name -> torch process-group name).
    All-gathers on a graph group listed in `stage_on_host` become
    host_staged_all_gather[_coalesced] (device tensors on gloo). The magi
    operators keep the recorded names (the registry resolves them).
    Returns the number of nodes changed."""
    import torch
    changed = 0
    for n in gm.graph.nodes:
        t = n.target
        if isinstance(t, torch._ops.OpOverloadPacket):
            t = getattr(t, "default", None)
        if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            continue
        if t.namespace != "_c10d_functional":
            continue
        argnames = [a.name for a in t._schema.arguments]
        if "group_name" not in argnames:
            continue
        i = argnames.index("group_name")
        if i < len(n.args) and isinstance(n.args[i], str) and n.args[i] in names:
            graph_name = n.args[i]
            a = list(n.args)
            a[i] = names[graph_name]
            n.args = tuple(a)
        elif isinstance(n.kwargs.get("group_name"), str) and n.kwargs["group_name"] in names:
            graph_name = n.kwargs["group_name"]
            kw = dict(n.kwargs)
            kw["group_name"] = names[graph_name]
            n.kwargs = kw
        else:
            continue
        op_name = t._schema.name.split("::")[-1]
        if graph_name in stage_on_host and op_name in _HOST_STAGED:
            n.target = _HOST_STAGED[op_name]
        changed += 1
    if changed:
        gm.recompile()
    return changed


def _load(path):
    from .region import load
    return load(path, transport="copy_engine")
