"""The overlap schedule of a loaded region (libmagi_aot's `magi_schedule`,
magi_aot/schedule.h) from Python: the latest-safe launch of every weight
gather, bounded in gathered-but-unconsumed bytes, with the library's cost
estimate (analytical, or a measured cost table).

    sched, report = schedule_region(region)             # a new Region, reordered
    report["gathers"][0]                                # launch, first use, stall, ...

`schedule_region` works on a copy of the region's document: the Region
given (and the load or plan behind it) is left as it is. The region
returned has the same placeholders in the same order (only launches and
the nodes that only feed them move), so its fake inputs and a runtime's
arguments are the original's.

`skeleton(doc)` is the sequence of a region's collective launches (weight
gathers included) with their process groups: two ranks whose skeletons
are equal issue their collectives in the same order under any schedule
(the pass never moves one launch past another), which is what a runtime
checks across ranks before it reorders (magi_aot.runtime.SymmRuntime).

No torch: scheduling works without PyTorch.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import time
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_uint32, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple

from ._lib import STATUS, CRegion, MagiError, _Lib, cstr, lib
from .optable import classify
from .region import _build, _dumps

if TYPE_CHECKING:
    from .region import Doc, Region, StrPath

__all__ = ["schedule_region", "skeleton", "graph_facts", "ScheduleOptions"]


class ScheduleOptions(ctypes.Structure):
    """magi_sched_options (revision 2)."""
    _fields_ = [("version", c_uint32), ("scale", c_double), ("margin_us", c_double),
                ("cost", c_void_p), ("cost_ctx", c_void_p), ("classify", c_void_p),
                ("classify_ctx", c_void_p), ("peer_fingerprints", POINTER(c_char_p)),
                ("n_peer_fingerprints", c_uint32), ("max_inflight_bytes", c_uint64),
                ("cost_table", c_void_p)]


class _Move(ctypes.Structure):
    _fields_ = [("node", c_char_p), ("from_index", c_uint32), ("to_index", c_uint32)]


class _Gather(ctypes.Structure):
    _fields_ = [("node", c_char_p), ("symm", c_int), ("cost_us", c_double), ("issue_us", c_double),
                ("need_us", c_double), ("covered_us", c_double), ("hidden", c_int),
                ("exposed_us", c_double), ("launch_index", c_uint32), ("consumer_index", c_uint32),
                ("bytes", c_uint64), ("inflight_bytes", c_uint64)]


class _Report(ctypes.Structure):
    _fields_ = [("applied", c_int), ("reason", c_char_p), ("moved", POINTER(_Move)),
                ("n_moved", c_uint32), ("gathers", POINTER(_Gather)), ("n_gathers", c_uint32),
                ("start_us", POINTER(c_double)), ("end_us", POINTER(c_double)),
                ("transfer_start_us", POINTER(c_double)), ("transfer_end_us", POINTER(c_double)),
                ("stall_us", POINTER(c_double)), ("total_us", c_double), ("n_nodes", c_uint32),
                ("max_inflight_bytes", c_uint64), ("peak_inflight_bytes", c_uint64)]


class _Timing(ctypes.Structure):
    _fields_ = [("launch_us", c_double), ("transfer_start_us", c_double),
                ("transfer_end_us", c_double), ("queued_us", c_double), ("first_use_us", c_double),
                ("stall_us", c_double), ("window_slack_us", c_double), ("exposed", c_int)]


# the prototypes that take this module's structs
_PROTOS = {
    "magi_schedule": (STATUS, [POINTER(POINTER(_Report)), c_void_p, POINTER(ScheduleOptions)]),
    "magi_sched_report_free": (None, [POINTER(_Report)]),
    "magi_sched_gather_timing": (STATUS, [POINTER(_Timing), POINTER(_Report), c_uint32]),
    "magi_cost_table_read_file": (STATUS, [POINTER(c_void_p), c_char_p]),
    "magi_cost_table_free": (None, [c_void_p]),
}
NO_BOUND = (1 << 64) - 1


def _declared() -> _Lib:
    if not lib.has("magi_schedule"):
        lib.declare(_PROTOS)
    return lib


def _options(scale: float, margin_us: float, max_inflight_bytes: Optional[int], peers: List[str],
             table: c_void_p) -> ScheduleOptions:
    o = ScheduleOptions()
    o.version = (2 << 16) | (ctypes.sizeof(ScheduleOptions) & 0xFFFF)
    o.scale, o.margin_us = float(scale), float(margin_us)
    o.max_inflight_bytes = NO_BOUND if max_inflight_bytes is None else int(max_inflight_bytes)
    if peers:
        arr = (c_char_p * len(peers))(*[p.encode() for p in peers])
        o.peer_fingerprints = ctypes.cast(arr, POINTER(c_char_p))
        o.n_peer_fingerprints = len(peers)
        o._keep = arr
    o.cost_table = table
    return o


def _report(rep: Any) -> Doc:
    r = rep.contents
    gathers = []
    for i in range(r.n_gathers):
        g = r.gathers[i]
        t = _Timing()
        _declared().magi_sched_gather_timing(byref(t), rep, i)
        gathers.append({
            "node": g.node.decode(), "kind": "symm" if g.symm else "nccl",
            "launch_index": g.launch_index, "first_use_index": g.consumer_index,
            "cost_us": g.cost_us, "need_us": g.need_us, "covered_us": g.covered_us,
            "hidden": bool(g.hidden), "stall_us": t.stall_us, "exposed": bool(t.exposed),
            "bytes": g.bytes, "inflight_bytes": g.inflight_bytes})
    return {"applied": bool(r.applied), "reason": r.reason.decode() if r.reason else None,
            "moved": [{"node": r.moved[i].node.decode(), "from": r.moved[i].from_index,
                       "to": r.moved[i].to_index} for i in range(r.n_moved)],
            "gathers": gathers, "simulated_us": r.total_us,
            "max_inflight_bytes": None if r.max_inflight_bytes == NO_BOUND else r.max_inflight_bytes,
            "peak_inflight_bytes": r.peak_inflight_bytes}


def graph_facts(doc: Doc) -> Dict[str, Any]:
    """What decides a region's collective order across ranks, from one
    read of its document: {"fingerprint": its canonical structural SHA-256
    (hex, as `magi_schedule`'s cross-rank guard compares it), "skeleton":
    skeleton(doc), "keys": a digest of its cost keys (magi_cost_keys), or
    None where the library cannot make them}."""
    h = hashlib.sha256()
    with CRegion.from_json_text(_dumps(doc)) as r:
        fp = r.fingerprint()
        ks: Any = c_void_p()  # None when the library cannot make the keys
        try:
            lib.magi_cost_keys(byref(ks), r.ptr)
        except MagiError:
            ks = None
        if ks is not None:
            try:
                for i in range(lib.magi_cost_keyset_node_count(ks)):
                    h.update((lib.magi_cost_keyset_node_key(ks, i) or b"-") + b"\n")
            finally:
                lib.magi_cost_keyset_free(ks)
    return {"fingerprint": fp, "skeleton": skeleton(doc),
            "keys": h.hexdigest() if ks is not None else None}


def schedule_region(region: Region, *, costs: Optional[StrPath] = None, scale: float = 1.0,
                    margin_us: float = 5.0, max_inflight_bytes: Optional[int] = 0,
                    peer_fingerprints: Iterable[str] = ()) -> Tuple[Region, Doc]:
    """Schedule a copy of `region` (a magi_aot.Region). Returns (the
    scheduled Region, its report). costs: a measured cost table's path
    (None: the analytical model); max_inflight_bytes: 0 two sets' worth
    (the default: the set of gathers in use and the next; schedule.h), None no bound; peer_fingerprints: other ranks' canonical
    fingerprints (any that differs leaves the graph unchanged, the report
    says why). The report: {"applied", "reason", "moved", "gathers": [per
    gather: "node", "kind", "launch_index", "first_use_index", "cost_us",
    "need_us", "covered_us", "hidden", "stall_us" (predicted), "exposed",
    "bytes", "inflight_bytes" (at its launch)], "simulated_us",
    "max_inflight_bytes", "peak_inflight_bytes", "schedule_us" (the
    pass's own time)}."""
    lib_ = _declared()
    table = c_void_p()
    if costs is not None:
        lib_.magi_cost_table_read_file(byref(table), cstr(os.fspath(costs)))
    try:
        with CRegion.from_json_text(_dumps(region.doc)) as cr:
            o = _options(scale, margin_us, max_inflight_bytes, list(peer_fingerprints), table)
            rep = POINTER(_Report)()
            t0 = time.perf_counter()
            lib_.magi_schedule(byref(rep), cr.ptr, byref(o))
            dt = time.perf_counter() - t0
            try:
                report = _report(rep)
            finally:
                lib_.magi_sched_report_free(rep)
            report["schedule_us"] = dt * 1e6
            out = _build(cr, region.path, t0)
    finally:
        if table:
            lib_.magi_cost_table_free(table)
    out.fingerprint = region.fingerprint
    for k in ("transport", "transport_source", "rewrite_report", "bind_report", "n_rewritten",
              "n_restored", "redistributes", "n_lowered", "skipped_legacy", "ignored",
              "loaded", "loaded_index"):
        setattr(out, k, getattr(region, k, None))
    out.source = region
    out.schedule_report = report
    return out, report


def skeleton(doc: Doc) -> List[List[Any]]:
    """[[kind, target, group], ...]: the region's collective launches (weight
    gathers and other collectives) in graph order, each with the process
    group it names (its last string argument), by the library's operator
    table."""
    out: List[List[Any]] = []
    for n in doc.get("graph", {}).get("nodes", []):
        kind = classify(n.get("op"), n.get("target"))
        if kind not in ("gather", "symm_gather", "collective"):
            continue
        group = None
        for a in reversed(n.get("args") or []):
            if isinstance(a, str):
                group = a
                break
        out.append([kind, str(n.get("target")), group])
    return out
