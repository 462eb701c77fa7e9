"""DTensor placements and specs as a region records them.

A placement is written as its canonical text (``Replicate()``, ``Shard(0)``,
``Partial(sum)``, ``_StridedShard(0,2)``; docs/MAGI_FX_JSON.md), which the
library's readers check; a DTensor placeholder's example carries a
``dtensor`` member (mesh shape, process-group name per mesh dimension, mesh
dimension names, placements, ``shard_rule``). This module turns torch's
placement objects and DTensors into those records and placements back into
torch objects: one place for the spelling on the Python side.
"""
import re

from .._torch_required import require_torch

__all__ = ["placement_text", "placement_object", "dtensor_spec", "is_placement", "is_dtensor", "as_dtensor"]

_TEXT = re.compile(r"^(?:Replicate\(\)|Shard\((0|[1-9][0-9]?)\)|Partial\(([a-z_]{1,15})\)|"
                   r"_StridedShard\((0|[1-9][0-9]?),([1-9][0-9]*)\))$")


def _placement_types():
    try:
        from torch.distributed.tensor import placement_types as pt
    except ImportError:  # torch built without distributed
        return None
    return pt


def is_placement(x):
    """Is x a torch.distributed.tensor placement (Shard, Replicate, Partial, _StridedShard)?"""
    pt = _placement_types()
    return pt is not None and isinstance(x, pt.Placement)


def _reduce_op(p):
    op = getattr(p, "reduce_op", "sum")
    op = getattr(op, "name", op)  # an enum in some versions
    return str(op).lower()


def placement_text(p):
    """The canonical text of a placement object; ValueError for what has none."""
    pt = _placement_types()
    if pt is None or not isinstance(p, pt.Placement):
        raise ValueError("not a DTensor placement: %r" % (p,))
    strided = getattr(pt, "_StridedShard", None)
    if strided is not None and isinstance(p, strided):
        return "_StridedShard(%d,%d)" % (p.dim, p.split_factor)
    if isinstance(p, pt.Shard):
        return "Shard(%d)" % p.dim
    if isinstance(p, pt.Replicate):
        return "Replicate()"
    if isinstance(p, pt.Partial):
        return "Partial(%s)" % _reduce_op(p)
    raise ValueError("placement %r has no canonical text" % (p,))


def placement_object(text):
    """The torch placement object a canonical text stands for."""
    m = _TEXT.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError("placement %r is not one of Replicate(), Shard(D), Partial(OP), "
                         "_StridedShard(D,F)" % (text,))
    require_torch("magi_aot.fx.dtensor.placement_object()")
    pt = _placement_types()
    if pt is None:
        raise ValueError("this torch has no torch.distributed.tensor: cannot build %s" % text)
    if text == "Replicate()":
        return pt.Replicate()
    if m.group(1) is not None:
        return pt.Shard(int(m.group(1)))
    if m.group(2) is not None:
        return pt.Partial(m.group(2))
    return pt._StridedShard(int(m.group(3)), split_factor=int(m.group(4)))


def is_dtensor(v):
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return False
    return isinstance(v, DTensor)


def dtensor_spec(v):
    """The ``dtensor`` member recorded for a DTensor example value v."""
    mesh = v.device_mesh
    names = getattr(mesh, "mesh_dim_names", None)
    groups = []
    for i in range(mesh.ndim):
        dim_groups = getattr(mesh, "_dim_group_names", None)
        if dim_groups is not None:
            groups.append(str(dim_groups[i]))
        else:
            groups.append(str(mesh.get_group(i).group_name))
    spec = {"mesh_shape": [int(x) for x in mesh.shape], "groups": groups,
            "placements": [placement_text(p) for p in v.placements], "shard_rule": "chunk"}
    if names:
        spec["dim_names"] = [str(x) for x in names]
    return spec


def _mesh_of(spec, device_type):
    """The DeviceMesh a spec names, from this process's process groups
    (resolved by the recorded names): each dimension's group gives this
    rank's row of it; the whole mesh is laid out as init_device_mesh lays
    it (a reshaped range: one stride per dimension), which the groups'
    members must confirm. ValueError naming the group otherwise."""
    import itertools
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.distributed_c10d import _resolve_process_group
    pgs, members = [], []
    for d, name in enumerate(spec["groups"]):
        try:
            pg = _resolve_process_group(name)
        except Exception as e:  # noqa: BLE001 - named below
            raise ValueError("mesh dimension %d: no process group '%s' in this process (%s); build "
                             "the model's device meshes first" % (d, name, e)) from None
        ranks = dist.get_process_group_ranks(pg)
        if len(ranks) != spec["mesh_shape"][d]:
            raise ValueError("mesh dimension %d: process group '%s' has %d ranks, the spec %d"
                             % (d, name, len(ranks), spec["mesh_shape"][d]))
        pgs.append(pg)
        members.append(ranks)
    me = dist.get_rank()
    mine = [m.index(me) for m in members]
    mesh = torch.empty(spec["mesh_shape"], dtype=torch.int64)
    for c in itertools.product(*[range(n) for n in spec["mesh_shape"]]):
        mesh[c] = me + sum(members[d][c[d]] - members[d][mine[d]] for d in range(len(c)))
    flat = mesh.flatten().tolist()
    if len(set(flat)) != len(flat) or min(flat) < 0 or max(flat) >= dist.get_world_size():
        raise ValueError("process groups %s are not one mesh of shape %s laid out as "
                         "init_device_mesh lays it" % (spec["groups"], spec["mesh_shape"]))
    names = tuple(spec["dim_names"]) if spec.get("dim_names") else None
    if len(pgs) == 1:
        return DeviceMesh.from_group(pgs[0], device_type, mesh_dim_names=names)
    return DeviceMesh.from_group(pgs, device_type, mesh=mesh, mesh_dim_names=names)


def as_dtensor(local, spec, shape, stride):
    """The DTensor a rank-local graph's DTensor placeholder stands for,
    from this rank's local tensor: its mesh from the recorded process
    groups (_mesh_of), its placements, global shape and stride as
    recorded. A DTensor given is returned as it is. What a redistribute
    the lowering kept needs to run on c10d."""
    require_torch("magi_aot.fx.dtensor.as_dtensor()")
    if is_dtensor(local):
        return local
    import torch
    from torch.distributed.tensor import DTensor
    mesh = _mesh_of(spec, local.device.type)
    return DTensor.from_local(local, mesh, [placement_object(p) for p in spec["placements"]],
                              run_check=False, shape=torch.Size(shape), stride=tuple(stride) if stride else None)
