"""The rendezvous of a SymmRuntime's ranks, and the C backend it creates.

Over torch.distributed's store (the default group's store, or `store=` a
TCPStore/FileStore with `rank=`/`world=`): every rank publishes its plan
digest and canonical encoding; every rank compares every plan with rank 0's
and, on a difference, every rank raises the same MagiError MAGI_ERR_MISMATCH
naming the rank and the first difference (magi_symm_plan_compare); a rank
that does not publish within `timeout` seconds is named in a
MAGI_ERR_TIMEOUT; a value that is no plan is a MAGI_ERR_FORMAT naming the
rank and the key. Rank 0 also creates a fresh private directory and
publishes its name; every rank accepts only a directory directly under the
rendezvous base whose name carries the job's prefix (magi-symm-<hash of the
key prefix>-), not a symlink, the user's, mode 0700 (else MAGI_ERR_FORMAT
naming the rank and the key): the C backend then runs its own rendezvous in
it (host: shared-memory window files; cuda: a Unix socket that exchanges
the CUDA IPC handles), which checks the plans once more. Keys live under
"<job>/<n>/", n counting this rank's runtimes in the store, so several
runtimes in one job do not collide; that prefix is also the backend's
job_id, so ranks of another job in the directory are refused by the C
handshake. Ranks on several hosts (runtime/hosts.py) compare their plans
over the store as one world, then each host meets in a directory of its
own, made by its lowest rank (rendezvous()).
"""
import datetime
import hashlib
import os
import re
import shutil
import stat
import tempfile
import time
from ctypes import byref, c_uint32, c_void_p

from .._lib import MagiError, SymmBackendConfig, SymmGroup, cstr, lib, struct_version
from .plan import compare_plans

__all__ = ["Handles", "rendezvous", "rendezvous_prefix"]

_STORE_COUNTER = "%s/runtimes/%d"
_DIGEST_HEX = re.compile(rb"[0-9a-f]{64}")


def rendezvous_prefix(job_id):
    """The name prefix of rank 0's rendezvous directory for the job whose
    store keys start with `job_id`: the peers accept no other name."""
    return "magi-symm-%s-" % hashlib.sha256(job_id.encode()).hexdigest()[:16]


class Handles:
    """The backend and the load (whose plan the backend borrows) of one
    runtime, freed together when the last reference goes. The runtime holds
    one until close(); every window view holds one through its storage
    (the host backend's ctypes array, the cuda backend's _CudaArray), so a
    tensor from alias() keeps the windows mapped after close() or after the
    runtime is collected, and the windows go with the last view."""
    __slots__ = ("b", "loaded")

    def __init__(self, loaded):
        self.b = None
        self.loaded = loaded  # the LoadedSet: freed after the backend, with the last reference

    def __del__(self):
        try:
            if self.b:
                lib.magi_symm_backend_free(self.b)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
        self.b = self.loaded = None


class _Store:
    """Store waits that name the rank that did not come."""

    def __init__(self, store, rank, world, timeout):
        self.store, self.rank, self.world, self.timeout = store, rank, world, timeout

    def wait(self, keys, what):
        try:
            self.store.wait(keys, datetime.timedelta(seconds=self.timeout))
        except Exception as e:  # noqa: BLE001 - torch raises several types
            missing = [k for k in keys if not self.has(k)]
            # "<pfx>plan/<r>" (and every "<pfx>.../<r>") is rank r's; "<pfx>dir" is rank 0's
            ranks = sorted({int(k.rsplit("/", 1)[-1]) if k.rsplit("/", 1)[-1].isdigit() else 0
                            for k in missing})
            ranks = [str(r) for r in ranks]
            raise MagiError(-12, "SymmRuntime rank %d: rank(s) %s did not %s within %.0f s (%s)"
                            % (self.rank, ", ".join(ranks), what, self.timeout,
                               str(e).splitlines()[0] if str(e) else type(e).__name__)) from None

    def has(self, key):
        try:
            return self.store.check([key])
        except Exception:  # noqa: BLE001
            return False

    def wait_count(self, key, what):
        deadline = time.monotonic() + self.timeout
        while int(self.store.add(key, 0)) < self.world:
            if time.monotonic() > deadline:
                raise MagiError(-12, "SymmRuntime rank %d: not every rank did %s within %.0f s"
                                % (self.rank, what, self.timeout))
            time.sleep(0.005)

    def plan_value(self, key, r):
        """(digest, encoding) of rank r's plan as the store holds it, or a
        MagiError naming the rank and the key (the same on every rank)."""
        v = bytes(self.store.get(key))
        digest, sep, enc = v.partition(b":")
        if not sep or not enc or not _DIGEST_HEX.fullmatch(digest):
            raise MagiError(-4, "SymmRuntime: store key '%s' (rank %d's plan) is not "
                            "'<sha256 hex>:<plan encoding>' (%d bytes: %r)" % (key, r, len(v), v[:48]))
        return digest, enc


def rendezvous_base(base, backend_name):
    """Where rank 0 creates the rendezvous directory (absolute)."""
    base = base or ("/dev/shm" if backend_name == "host" and os.path.isdir("/dev/shm")
                    else tempfile.gettempdir())
    return os.path.abspath(base)


def _directory_value(st, pfx, base, created, key=None, leader=0):
    """The rendezvous directory the store names (under `key`, default
    "<pfx>dir"), accepted only as the fresh one the leader (rank 0, or the
    lowest rank of this host) created: a direct child of the rendezvous
    base with the job's name prefix, a directory (no symlink) of this
    user, mode 0700; else a MagiError naming the rank and the key."""
    key = key or pfx + "dir"
    raw = bytes(st.store.get(key))
    what = "SymmRuntime rank %d: store key '%s' (rank %d's rendezvous directory)" % (st.rank, key, leader)
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MagiError(-4, "%s is not UTF-8 (%r)" % (what, raw[:80])) from None
    name = os.path.basename(path)
    if "\0" in path or os.path.dirname(path) != base or name in ("", ".", ".."):
        raise MagiError(-4, "%s: %r is not a directory directly under the rendezvous base %s"
                        % (what, path, base))
    prefix = rendezvous_prefix(pfx)
    if not name.startswith(prefix):
        raise MagiError(-4, "%s: %r: its name does not start with %s (the job's)" % (what, path, prefix))
    try:
        s = os.lstat(path)
    except OSError as e:
        raise MagiError(-4, "%s: %r: %s" % (what, path, e.strerror)) from None
    why = None
    if stat.S_ISLNK(s.st_mode):
        why = "is a symbolic link"
    elif not stat.S_ISDIR(s.st_mode):
        why = "is not a directory"
    elif s.st_uid != os.geteuid():
        why = "is owned by uid %d, not %d" % (s.st_uid, os.geteuid())
    elif stat.S_IMODE(s.st_mode) != 0o700:
        why = "has mode %04o, not 0700" % stat.S_IMODE(s.st_mode)
    elif st.rank == leader and path != created:
        why = "is not the directory rank %d created (%s)" % (leader, created)
    if why:
        raise MagiError(-4, "%s: %r %s" % (what, path, why))
    return path


def rendezvous(handles, plan, groups, *, store, rank, world, job, timeout, backend_name, device_index,
               base=None, hosts=None):
    """Meet the peers (module doc) and create and rendezvous this rank's C
    backend on `plan` (a RuntimePlan) into handles.b. `groups`: {name: the
    caller's member ranks}. `hosts`: every rank's host identity (None: one
    host). Ranks of several hosts compare plans over the store as one
    world, then each host meets alone: the lowest rank of each host
    creates the private directory on that host and publishes it under
    "<pfx>dir/<that rank>", and the backend is made for the host's ranks
    (rank and world within the host, only the groups whose members are all
    on it: a group that spans hosts has no window). No directory is shared
    between hosts. Returns the job id (None for a world of 1). The private
    directory is removed on success and on failure."""
    tmp = None
    leader = 0
    local = list(range(world))
    if hosts is not None and len(set(hosts)) > 1:
        local = [r for r in range(world) if hosts[r] == hosts[rank]]
        leader = local[0]
    try:
        job_id = backend_job = None
        if world > 1:
            st = _Store(store, rank, world, timeout)
            n = store.add(_STORE_COUNTER % (job, rank), 1)
            pfx = "%s/%d/" % (job, n)
            job_id = pfx  # the same on every rank (the schedule's agreement keys start with it)
            backend_job = pfx if len(local) == world else "%shost%d/" % (pfx, leader)
            dir_key = pfx + "dir" if len(local) == world else pfx + "dir/%d" % leader
            store.set(pfx + "plan/%d" % rank, plan.plan_sha256.encode() + b":" + plan.encoding)
            where = rendezvous_base(base, backend_name)
            if rank == leader:
                tmp = tempfile.mkdtemp(prefix=rendezvous_prefix(pfx), dir=where)
                store.set(dir_key, tmp)
            keys = [pfx + "plan/%d" % r for r in range(world)] + [dir_key]
            st.wait(keys, "publish its plan")
            compare_plans([st.plan_value(pfx + "plan/%d" % r, r) for r in range(world)])
            rdzv = _directory_value(st, pfx, where, tmp, dir_key, leader)
        else:
            rdzv = None if backend_name == "host" else tempfile.mkdtemp(prefix="magi-symm-")
            tmp = rdzv
        ops_ = lib.magi_symm_backend_find(backend_name.encode())
        if not ops_:
            raise MagiError(-13, lib.magi_last_error().decode())
        index = {r: i for i, r in enumerate(local)}
        mine = {name: [index[m] for m in members] for name, members in groups.items()
                if all(m in index for m in members)}
        ranks = {}
        garr = (SymmGroup * max(1, len(mine)))()
        for i, (name, members) in enumerate(sorted(mine.items())):
            ranks[name] = (c_uint32 * len(members))(*members)
            garr[i] = SymmGroup(name.encode(), len(members), ranks[name], None)
        cfg = SymmBackendConfig(
            version=struct_version(SymmBackendConfig.REVISION, SymmBackendConfig),
            rank=index[rank], world=len(local), groups=garr, n_groups=len(mine),
            rendezvous=cstr(rdzv) if rdzv else None, timeout_ms=int(timeout * 1000),
            device=device_index, world_comm=None, job_id=cstr(backend_job) if backend_job else None)
        b = c_void_p()
        lib.magi_symm_backend_create(byref(b), ops_, plan.ptr, byref(cfg))
        handles.b = b
        lib.magi_symm_backend_rendezvous(b)
        if world > 1:
            store.add(pfx + "joined", 1)
            st.wait_count(pfx + "joined", "finish the backend rendezvous")
        return job_id
    finally:  # the leader (or a world of 1) owns the directory: gone on success or failure
        if tmp and (world == 1 or rank == leader):
            shutil.rmtree(tmp, ignore_errors=True)
