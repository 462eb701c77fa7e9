"""Process groups of a SymmRuntime: the members of every group a graph
names, the torch process groups made for them, and the gathers kept on
c10d pointed at them.

Every process-group name the graphs record gets explicit member ranks.
`groups` maps a name to a partition of the world (a list of rank lists;
each rank belongs to one of them) or to the one list of the caller's
members; the default places each group on its mesh dimension in a
row-major mesh of consecutive ranks (init_device_mesh's layout): the
library reports each mesh dimension's size and stride (mesh_layout), so the
outer dimension of a 2-D mesh (an expert mesh's efsdp groups) gets ranks
that far apart, and a group with no recorded stride blocks of consecutive
ranks of the size the graph records. Where this process has a torch process group of a defaulted
name that holds this rank with other members (a mesh dimension whose
groups are strided, e.g. the outer dimension of a 2-D mesh), the runtime
refuses, naming both memberships, rather than gather from the wrong peers. The same partition creates one torch process group per block
(dist.new_group, collective), and gathers that stay on c10d (cast, padded,
`transport="nccl"` regions) are re-pointed at the caller's block
(remap_groups).
"""
from .._lib import MagiError
from ..optable import classify

__all__ = ["collective_groups", "collective_group_names", "mesh_layout", "mesh_blocks", "live_group_members",
           "resolve_groups", "make_c10d_groups", "remap_groups",
           "host_staged_all_gather", "host_staged_all_gather_coalesced"]


def _group_uses(docs):
    """(group name, size or None) of every c10d collective / symm gather
    the graphs record: a gather's (input, group_size, group_name) or the
    group_name / group_size keywords; another collective's group_name
    keyword, else its last string argument (an all-to-all names its group
    but not its size)."""
    for doc in docs:
        for n in doc["graph"]["nodes"]:
            if n.get("op") != "call_function":
                continue
            cls = classify("call_function", n.get("target") or "")  # the library's operator table
            if cls not in ("gather", "symm_gather", "collective"):
                continue
            a = n.get("args") or []
            kw = n.get("kwargs") or {}
            if cls != "collective" and len(a) >= 3 and isinstance(a[1], int) and isinstance(a[2], str):
                yield a[2], a[1]
            elif isinstance(kw.get("group_name"), str):
                size = kw.get("group_size")
                yield kw["group_name"], size if isinstance(size, int) else None
            elif cls == "collective":
                strs = [x for x in a if isinstance(x, str)]
                if strs:
                    yield strs[-1], None


def collective_groups(docs):
    """{group name: group size} of every c10d collective / symm gather the
    graphs record with its size (args named group_size / group_name of the
    op schemas)."""
    out = {}
    for name, size in _group_uses(docs):
        if size is not None:
            out.setdefault(name, size)
    return out


def collective_group_names(docs):
    """Names of the process groups every c10d collective / symm gather of
    the graphs takes, sized or not."""
    return {name for name, _ in _group_uses(docs)}


def live_group_members(name, rank, world):
    """The sorted global ranks of this process's torch process group
    `name`, when torch.distributed is initialised over `world` ranks as
    `rank` and such a group exists here and holds this rank; else None.
    Never imports torch for a process that has not."""
    import sys
    if "torch.distributed" not in sys.modules:
        return None
    try:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            return None
        if dist.get_world_size() != world or dist.get_rank() != rank:
            return None
        from torch.distributed.distributed_c10d import _resolve_process_group
        ranks = sorted(dist.get_process_group_ranks(_resolve_process_group(name)))
    except Exception:  # noqa: BLE001 - no such group in this process
        return None
    return ranks if rank in ranks else None


def mesh_layout(regions):
    """{group name: (size, stride)} of the mesh dimensions the regions'
    DTensor placeholders name (Region.mesh_groups, as the library read
    them): stride is the rank distance between a group's members in
    a row-major mesh of consecutive ranks, init_device_mesh's layout (1
    for the last mesh dimension). A name recorded with two layouts is
    refused naming both."""
    out = {}

    def note(name, size, stride):
        if not isinstance(name, str) or not isinstance(stride, int) or stride < 1:
            return
        got = out.setdefault(name, (size, stride))
        if got != (size, stride):
            raise MagiError(-11, "group '%s' is a mesh dimension of %s ranks %d apart in one region and of %s "
                            "ranks %d apart in another: pass groups={'%s': [[ranks], ...]}"
                            % (name, got[0], got[1], size, stride, name))
    for r in regions:
        for name, m in (getattr(r, "mesh_groups", None) or {}).items():
            note(name, m.get("size"), m.get("stride"))
    return out


def mesh_blocks(size, stride, world):
    """Every group of a mesh dimension of `size` ranks `stride` apart in a
    row-major mesh of consecutive ranks repeated over `world` (stride 1:
    blocks of consecutive ranks); None where they do not fit the world."""
    span = size * stride
    if size < 1 or stride < 1 or span > world or world % span:
        return None
    return [[base + off + i * stride for i in range(size)]
            for base in range(0, world, span) for off in range(stride)]


def resolve_groups(docs, windows, rank, world, groups, layout=None):
    """({name: ranks of the caller's block}, {name: every block, or None
    when only the caller's block is known}) for every group the graphs
    (documents `docs`) and the plan's windows name; `groups` as
    SymmRuntime's; `layout` ({name: (size, stride)}, mesh_layout) places a
    group the caller does not describe on its mesh dimension, and sizes a
    collective that names a group without its size. Errors name the
    group."""
    layout = layout or {}
    docs = list(docs)
    sizes = collective_groups(docs)
    for name in collective_group_names(docs):
        if name not in sizes and layout.get(name, (None,))[0]:
            sizes[name] = layout[name][0]
    for w in windows:
        sizes.setdefault(w["group"], w["group_size"])
    groups = dict(groups or {})
    mine_of, parts = {}, {}
    for name, size in sorted(sizes.items()):
        spec = groups.pop(name, None)
        defaulted = spec is None
        if spec is None:
            stride = layout.get(name, (None, 1))[1]
            blocks = mesh_blocks(size, stride, world)
            if blocks is None:
                raise MagiError(-1, "group '%s' of size %d%s does not divide world %d: pass "
                                "groups={'%s': [[ranks], ...]}"
                                % (name, size, " (ranks %d apart)" % stride if stride > 1 else "", world, name))
        elif spec and all(isinstance(x, (list, tuple)) for x in spec):
            blocks = [list(map(int, b)) for b in spec]
        else:
            blocks = None
            mine = list(map(int, spec))
        if blocks is not None:
            seen = sorted(r for b in blocks for r in b)
            if seen != list(range(world)):
                raise MagiError(-1, "group '%s': blocks %s are not a partition of ranks 0..%d"
                                % (name, blocks, world - 1))
            mine = next(b for b in blocks if rank in b)
        if len(mine) != size:
            raise MagiError(-11, "group '%s': the graph records size %d, the members given "
                            "are %s" % (name, size, mine))
        if rank not in mine:
            raise MagiError(-1, "group '%s': members %s do not contain rank %d"
                            % (name, mine, rank))
        if defaulted:
            # the default (a mesh of consecutive ranks) is an assumption;
            # where this process has the group itself (the mesh built
            # before the load, as torchtitan does), a different membership
            # is an error, never a gather from the wrong peers
            live = live_group_members(name, rank, world)
            if live is not None and live != sorted(mine):
                raise MagiError(-11, "group '%s': this process's process group of that name has ranks %s, "
                                "the default (a mesh of consecutive ranks) would be %s: pass "
                                "groups={'%s': %s} (every block of the mesh dimension)"
                                % (name, live, mine, name, "[[ranks], ...]"))
        mine_of[name] = mine
        parts[name] = blocks
    if groups:
        raise MagiError(-1, "groups %s are not used by the regions (they record %s)"
                        % (sorted(groups), sorted(sizes)))

    return mine_of, parts


def make_c10d_groups(groups, partitions, rank):
    """One torch process group per block of every group (collective, in
    name order on every rank). Returns ({graph name: the caller's
    ProcessGroup}, {graph name: its c10d group name})."""
    import torch.distributed as dist
    pgs, names = {}, {}
    for name in sorted(groups):
        blocks = partitions[name]
        if blocks is None:
            raise MagiError(-1, "group '%s': give the whole partition ([[ranks], ...]) to "
                            "create its process groups, or new_groups=False" % name)
        for b in blocks:
            pg = dist.new_group(b)
            if rank in b:
                pgs[name] = pg
                names[name] = pg.group_name
    return pgs, names


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
