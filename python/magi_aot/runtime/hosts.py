"""Hosts of a SymmRuntime's ranks, and the process groups that span them.

A copy-engine window needs every member of its group on one host (one
NVLink domain, one shared-memory namespace). Each rank names its host
(host_id) and publishes it through the store; a group whose members (any
block of its partition) are on two or more hosts is planned with its
gathers kept on NCCL, reason "cross_host" (magi_loader_options /
magi_symm_plan_options cross_host_groups), the same on every rank.

A rank's host is, in order:
  - MAGI_AOT_HOST_ID, when set: an explicit identity, for tests (several
    rank processes of one machine acting as several hosts) and for
    containers whose host names say nothing about the machine;
  - torchrun's node: GROUP_RANK when LOCAL_WORLD_SIZE is set (torchrun
    sets both on every rank it starts);
  - the host name.
"""
import socket

from .. import config
from .._lib import MagiError
from .rendezvous import _Store

__all__ = ["HOST_ID_ENV", "host_id", "exchange_hosts", "cross_host_groups"]

HOST_ID_ENV = config.HOST_ID.name
_ROUNDS = "%s/host_rounds/%d"


def host_id(environ=None):
    """This process's host identity (module doc), as a string that names
    its source ("env:...", "node:...", "name:...")."""
    given = config.HOST_ID.get(environ)
    if given:
        return "env:" + given
    node = config.GROUP_RANK.raw(environ)
    if config.LOCAL_WORLD_SIZE.raw(environ) and node is not None:
        return "node:" + node
    return "name:" + socket.gethostname()


def exchange_hosts(store, rank, world, job, timeout):
    """Every rank's host identity ([rank 0's, ..., rank world-1's]),
    exchanged through the store (collective over the world; keys under
    "<job>/hosts/<n>/", n counting this rank's exchanges). A rank that does
    not publish within `timeout` seconds is named in a MAGI_ERR_TIMEOUT."""
    mine = host_id()
    if world <= 1:
        return [mine]
    n = store.add(_ROUNDS % (job, rank), 1)
    pfx = "%s/hosts/%d/" % (job, n)
    store.set(pfx + "%d" % rank, mine.encode("utf-8"))
    keys = [pfx + "%d" % r for r in range(world)]
    _Store(store, rank, world, timeout).wait(keys, "publish its host")
    out = []
    for r, k in enumerate(keys):
        try:
            out.append(bytes(store.get(k)).decode("utf-8"))
        except UnicodeDecodeError:
            raise MagiError(-4, "SymmRuntime: store key '%s' (rank %d's host) is not UTF-8" % (k, r)) from None
    return out


def cross_host_groups(mine_of, partitions, hosts):
    """The group names (of resolve_groups' {name: the caller's block},
    {name: every block or None}) with a block whose members are on two or
    more of `hosts` (one identity per rank). Only the caller's block is
    judged where the partition is not known (a group given as one list)."""
    out = []
    for name in sorted(mine_of):
        blocks = partitions.get(name) or [mine_of[name]]
        if any(len({hosts[r] for r in b}) > 1 for b in blocks):
            out.append(name)
    return out
