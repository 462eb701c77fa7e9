"""Load, save, fingerprint and describe regions through libmagi_aot.

The split of work: the C loader (magi_aot/load.h) reads and verifies every
file (JSON, artifact v1, legacy v0), computes fingerprints, input
descriptors, the transport decision, the rank-local form and the lowering
for a rank, one plan over all regions of a load and the rewrite; Python
turns each loaded region into a document of dicts (docio: built from the C
region directly, no JSON text) and keeps the loader alive behind the
Regions of one load (magi_aot.loaded.LoadedSet). A save goes the other way
as JSON text: the document the walk (magi_aot.fx.walk) made is printed
once and read by the C reader (magi_json_read), which checks it and
encodes the artifact.
"""
from __future__ import annotations

import ctypes
import json
import os
import time
from ctypes import byref, c_char_p, c_size_t, c_uint8, c_uint32, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, Union

from . import docio
from ._lib import (LOAD_TRANSPORTS, SECTION_COMPILED, SYMM_TRANSPORTS, TRANSPORT_SOURCES, CRegion, LoadedInfo,
                   LoaderOptions, MagiError, SymmBackendConfig, cstr, has, lib, struct_version)
from .loaded import LoadedSet

if TYPE_CHECKING:
    import torch

# A magi-fx JSON v1 document, or one of its parts, as dicts and lists.
Doc = Dict[str, Any]
# What the load and save calls take for a file: a path as str or os.PathLike.
StrPath = Union[str, "os.PathLike[str]"]

__all__ = ["Region", "load", "load_many", "load_bytes", "load_bytes_with_sections", "load_buffers", "save",
           "save_doc", "fingerprint", "inputs", "region_from_doc"]


def _example_of(node: Doc) -> Any:
    meta = node.get("meta")
    if not meta:
        return None
    return meta.get("example_value")


class Region:
    """One loaded region.

    Attributes:
      path            the file it came from (None for an in-memory document)
      doc             the magi-fx JSON v1 document (dict) as the C library wrote
                      it back, after the copy-engine rewrite when one was run
      fingerprint     canonical structural SHA-256 (hex) of the region as
                      saved (before any rewrite); None if the library lacks it
      model_tag, model_idx, traced_files, compile_config, symbols {name: hint}
      placeholders    [{"index", "node", "name", "target", "example_value"}]
      inputs          the library's input descriptors (symbolic; see inputs()),
                      None when they cannot be built; inputs_error says why
                      (a MagiError, e.g. MAGI_ERR_MISSING_META naming them)
      skipped_legacy  legacy keys the reader skipped unread ("example_inputs", ...)
      ignored         unknown keys/sections the reader skipped
      rewrite_report  per all-gather: {"node", "name", "from", "to", "coalesced",
                      "already_symm", "reason", "detail", "slots"}; None if not run
      bind_report     {"windows", "slots", "bindings", "plan_sha256"}; None if not
                      run. windows and slots are the whole load's (shared by
                      every region of one load_many), bindings this region's
      n_rewritten     gathers the rewrite turned into magi.symm_*
      n_restored      magi.symm_* gathers turned back into NCCL (transport nccl)
      transport       "copy_engine" | "nccl" as decided for this region, and
      transport_source "option" | "compile_config" | "default"
      load_seconds    wall time of load() (read + verify + fingerprint + report)
      redistributes   per DTensor redistribute: {"node", "weight", "lowered", and
                      "gather", "group", "cast", "padded", "global_rows", "chunk_rows",
                      "local_rows" when lowered, else "reason"}
      mesh_groups     {group name: {"size", "stride"}} of every mesh dimension the
                      DTensor placeholders name (stride: the rank distance between its
                      members in a row-major mesh of consecutive ranks)
      n_lowered       redistributes lowered to gathers for this rank
      loaded, loaded_index  the LoadedSet of the load that made it and its
                      place there (None for a Region built from a document)
      schedule_report set only on a Region magi_aot.schedule.schedule_region made
    """
    schedule_report: Doc

    def __init__(self, doc: Doc, *, path: Optional[str] = None, fingerprint: Optional[str] = None,
                 inputs: Optional[List[Doc]] = None, skipped_legacy: Iterable[str] = (),
                 ignored: Iterable[str] = (), rewrite_report: Optional[List[Doc]] = None,
                 bind_report: Optional[Doc] = None, n_rewritten: int = 0, load_seconds: float = 0.0,
                 inputs_error: Optional[MagiError] = None) -> None:
        self.path = path
        self.doc = doc
        self.fingerprint = fingerprint
        self.inputs = inputs
        self.inputs_error = inputs_error
        self.skipped_legacy: List[str] = list(skipped_legacy)
        self.ignored: List[str] = list(ignored)
        self.rewrite_report = rewrite_report
        self.bind_report = bind_report
        self.n_rewritten = n_rewritten
        self.load_seconds = load_seconds
        self.symbol_map: Optional[Dict[str, Any]] = None  # set by fake_inputs(): saved name -> SymInt
        self.n_restored = 0
        self.transport: Optional[str] = None
        self.transport_source: Optional[str] = None
        self.sections_decoded = 0
        self.redistributes: List[Doc] = []  # DTensor redistributes and the lowering's decisions
        self.mesh_groups: Dict[str, Dict[str, int]] = {}  # the mesh dimensions the DTensor specs name
        self.n_lowered = 0
        self.loaded: Optional[LoadedSet] = None  # the LoadedSet behind it (magi_aot.loaded)
        self.loaded_index: Optional[int] = None
        self.source: Optional[Region] = None  # the Region it was made from (a runtime's reload)

    # -- document views
    @property
    def model_tag(self) -> Optional[str]:
        return self.doc.get("model_tag")

    @property
    def model_idx(self) -> Optional[int]:
        return self.doc.get("model_idx")

    @property
    def traced_files(self) -> List[str]:
        return list(self.doc.get("traced_files", ()))

    @property
    def compile_config(self) -> Optional[Doc]:
        return self.doc.get("compile_config")

    @property
    def symbols(self) -> Dict[str, Any]:
        return {k: v.get("hint") for k, v in self.doc.get("symbols", {}).items()}

    @property
    def nodes(self) -> List[Doc]:
        return self.doc["graph"]["nodes"]

    @property
    def placeholders(self) -> List[Doc]:
        out: List[Doc] = []
        for i, n in enumerate(self.nodes):
            if n["op"] == "placeholder":
                out.append({"index": len(out), "node": i, "name": n["name"],
                            "target": n.get("target"), "example_value": _example_of(n)})
        return out

    def concrete_inputs(self) -> List[Doc]:
        """Shapes/strides/values evaluated under the symbol hints (C evaluator).
        Raises MagiError MAGI_ERR_UNBACKED naming symbol and placeholder when a
        hint is null."""
        return _inputs_of_doc(self.doc, concrete=True)

    def fake_inputs(self, fake_mode: Any = None, *, device: Any = None) -> List[Any]:
        """Rebuild the placeholders as FakeTensors / SymInts (see magi_aot.fx.fake)."""
        from .fx.fake import fake_inputs
        return fake_inputs(self, fake_mode, device=device)

    def localized(self, rank: Optional[int] = None, world: Optional[int] = None) -> "Region":
        """The rank-local form of this region (magi_aot.fx.rebuild.localize:
        magi_localize_rank for `rank` of `world`, or magi_localize without
        them), as a new Region whose `source` is this one."""
        return _localized(self, rank, world)

    def graph_module(self, *, symbol_values: Optional[Dict[str, Any]] = None,
                     allow_targets: Iterable[str] = ()) -> torch.fx.GraphModule:
        """Rebuild the graph as a torch.fx.GraphModule (see magi_aot.fx.rebuild;
        allow_targets: targets past the allow-list, magi_aot.fx.targets)."""
        from .fx.rebuild import graph_module
        return graph_module(self, symbol_values=symbol_values, allow_targets=allow_targets)

    def __repr__(self) -> str:
        return "<magi_aot.Region %s#%s %d nodes fp=%s>" % (
            self.model_tag, self.model_idx, len(self.nodes),
            (self.fingerprint or "?")[:12])


def _str(b: Optional[bytes]) -> Optional[str]:
    return b.decode("utf-8", "replace") if b is not None else None


def _check_transport(transport: Optional[str]) -> None:
    if transport not in LOAD_TRANSPORTS:
        raise ValueError("transport must be None (the region's compile_config, else nccl), "
                         "'nccl' or 'copy_engine', not %r" % (transport,))


def plan_tables(plan: c_void_p) -> Tuple[List[Doc], List[Doc], str]:
    """(windows, slots, plan_sha256) of a magi_symm_plan: the windows and
    slots as dicts ({"dtype", "group", "group_size", "part", "bytes",
    "first_slot", "n_slots"}; {"weight", "window", "offset", "nbytes",
    "shape"}) and the plan's digest (hex)."""
    n = c_uint32()
    w = lib.magi_symm_plan_windows(byref(n), plan)
    windows = [{"dtype": _str(w[k].dtype), "group": _str(w[k].group),
                "group_size": w[k].group_size, "part": w[k].part, "bytes": w[k].bytes,
                "first_slot": w[k].first_slot, "n_slots": w[k].n_slots}
               for k in range(n.value)]
    sl = lib.magi_symm_plan_slots(byref(n), plan)
    slots = [{"weight": _str(sl[k].weight), "window": sl[k].window, "offset": sl[k].offset,
              "nbytes": sl[k].nbytes, "shape": [sl[k].shape[j] for j in range(sl[k].ndim)]}
             for k in range(n.value)]
    digest = (c_uint8 * 32)()
    lib.magi_symm_plan_digest(digest, plan)
    return windows, slots, bytes(digest).hex()


def _plan_report(plan: c_void_p, i: int) -> Tuple[List[Doc], Doc]:
    """Gathers of region i and the plan's windows/slots/its bindings."""
    n = c_uint32()
    g = lib.magi_symm_plan_gathers(byref(n), plan, i)
    gathers = []
    for k in range(n.value):
        x = g[k]
        gathers.append({
            "node": x.node, "name": _str(x.name), "from": _str(x.from_), "to": _str(x.to),
            "coalesced": bool(x.coalesced), "already_symm": bool(x.already_symm),
            "reason": _str(lib.magi_symm_reason_name(x.reason)) or str(x.reason),
            "detail": _str(x.detail),
            "slots": [x.slots[j] for j in range(x.n_slots)],
        })
    windows, slots, digest = plan_tables(plan)
    b = lib.magi_symm_plan_bindings(byref(n), plan, i)
    bindings = [{"node": b[k].node, "placeholder": _str(b[k].placeholder), "slot": b[k].slot}
                for k in range(n.value)]
    return gathers, {"windows": windows, "slots": slots, "bindings": bindings,
                     "plan_sha256": digest}


def _mesh_groups(loader: c_void_p, i: int) -> Dict[str, Dict[str, int]]:
    """{group: {"size", "stride"}} of region i (magi_loader_mesh_groups)."""
    n = c_uint32()
    g = lib.magi_loader_mesh_groups(byref(n), loader, i)
    return {_str(g[k].name) or "": {"size": int(g[k].size), "stride": int(g[k].stride)} for k in range(n.value)}


def _lowered_report(loader: c_void_p, i: int) -> List[Doc]:
    """The DTensor redistributes of region i and the lowering's decisions
    (magi_loader_lowered): [{"node", "weight", "lowered", ...}]."""
    n = c_uint32()
    lw = lib.magi_loader_lowered(byref(n), loader, i)
    out: List[Doc] = []
    for k in range(n.value):
        e: Doc = {"node": _str(lw[k].node), "weight": _str(lw[k].weight), "lowered": bool(lw[k].lowered)}
        if lw[k].lowered:
            e.update(gather=_str(lw[k].gather), group=_str(lw[k].group), cast=bool(lw[k].cast),
                     padded=bool(lw[k].padded), at_bind=bool(lw[k].at_bind), global_rows=lw[k].global_rows,
                     chunk_rows=lw[k].chunk_rows, local_rows=lw[k].local_rows, shard_dim=lw[k].shard_dim,
                     rewrapped=bool(lw[k].rewrapped), group_stride=lw[k].group_stride)
        else:
            e["reason"] = _str(lw[k].reason)
        out.append(e)
    return out


def _regions_of(loader: c_void_p, t0: float) -> List[Region]:
    """Region objects for everything the C loader holds."""
    out: List[Region] = []
    for i in range(lib.magi_loader_count(loader)):
        info = LoadedInfo()
        lib.magi_loader_info(byref(info), loader, i)
        creg = CRegion(c_void_p(lib.magi_loader_region(loader, i)))  # borrowed: never closed
        ins, ins_err = None, None
        text = lib.magi_loader_inputs_json(loader, i)
        if text is not None:
            ins = json.loads(text)
        else:
            msg = c_char_p()
            code = lib.magi_loader_inputs_status(byref(msg), loader, i)
            ins_err = MagiError(code, _str(msg.value) or "", "magi_inputs_write_json")
        gathers, bind = _plan_report(lib.magi_loader_plan(loader), i)
        doc = docio.document(creg.ptr)  # marshal, not JSON text (docio.py)
        r = Region(doc, path=_str(info.path), fingerprint=info.fingerprint.decode(), inputs=ins,
                   skipped_legacy=creg.dropped_legacy(), ignored=creg.ignored(),
                   rewrite_report=gathers, bind_report=bind,
                   n_rewritten=info.n_rewritten, inputs_error=ins_err)
        r.n_restored = info.n_restored
        r.redistributes = _lowered_report(loader, i)
        r.mesh_groups = _mesh_groups(loader, i)
        r.n_lowered = info.n_lowered
        r.transport = SYMM_TRANSPORTS.get(info.transport)
        r.transport_source = TRANSPORT_SOURCES.get(info.transport_source)
        r.sections_decoded = info.sections_decoded
        out.append(r)
    dt = time.perf_counter() - t0
    for r in out:
        r.load_seconds = dt
    return out


def _run_loader(fill: Callable[[c_void_p], object], *, transport: Optional[str] = None,
                window_cap_bytes: int = 0, rank: Optional[int] = None, world: Optional[int] = None,
                rank_local: Optional[bool] = None, keep_cast_pad: bool = False,
                cross_host_groups: Iterable[str] = ()) -> List[Region]:
    """Run one load (fill(loader) loads the files or buffers) and return its
    Regions, which keep the loader alive (LoadedSet). rank_local defaults to
    whether a rank view (world) was given."""
    if rank_local is None:
        rank_local = world is not None
    if (rank_local or rank is not None) and world is None:
        raise ValueError("a rank-local load needs world= (and rank=)")
    if world is not None and rank is None:
        raise ValueError("world=%s needs rank= too (this process's rank): a rank view of rank 0 "
                         "is rank=0" % (world,))
    opts = LoaderOptions(transport=LOAD_TRANSPORTS[transport], window_cap_bytes=int(window_cap_bytes))
    if world is not None:
        opts.bind.rank, opts.bind.world = int(rank or 0), int(world)
    opts.keep_cast_pad = int(bool(keep_cast_pad))
    opts.rank_local = int(bool(rank_local))
    cross = sorted(set(cross_host_groups or ()))
    cross_arr = (c_char_p * max(1, len(cross)))(*[cstr(g) for g in cross])
    if cross:
        opts.cross_host_groups, opts.n_cross_host_groups = cross_arr, len(cross)
    loader = c_void_p()
    t0 = time.perf_counter()
    lib.magi_loader_new(byref(loader), byref(opts))
    try:
        fill(loader)
        regions = _regions_of(loader, t0)
        check_weight_identity(regions)
    except BaseException:
        lib.magi_loader_free(loader)
        raise
    s = LoadedSet(loader, transport=transport, window_cap_bytes=window_cap_bytes,
                  rank=None if world is None else int(rank or 0), world=None if world is None else int(world),
                  rank_local=rank_local, keep_cast_pad=keep_cast_pad, cross_host_groups=cross)
    for i, r in enumerate(regions):
        r.loaded, r.loaded_index = s, i
    return regions


def check_weight_identity(regions: List[Region]) -> List[Region]:
    """Regions loaded (or run) together share a weight's slot by its name
    (the placeholder target). A save backend names each module weight by
    its path from the model's root and records it as the example's
    "module_path": a name that two regions record with different paths
    names two weights, and is refused (MAGI_ERR_MISMATCH) naming both."""
    seen: Dict[str, Tuple[str, Region]] = {}
    for r in regions:
        for p in r.placeholders:
            ex = p.get("example_value") or {}
            path = ex.get("module_path") if isinstance(ex, dict) else None
            if not isinstance(path, str):
                continue
            first = seen.setdefault(p["target"], (path, r))
            if first[0] != path:
                raise MagiError(-11, "weight '%s' is '%s' in %s and '%s' in %s: two weights under one "
                                "name (save the regions of one model with one backend, whose root is "
                                "the model)" % (p["target"], first[0], _where(first[1]), path, _where(r)),
                                "load_many")
    return regions


def _where(r: Region) -> str:
    return "%s (region %s)" % (r.path or "a document", r.doc.get("model_idx", "?"))


def load_many(paths: Iterable[StrPath], *, transport: Optional[str] = None, window_cap_bytes: int = 0,
              rank: Optional[int] = None, world: Optional[int] = None, rank_local: Optional[bool] = None,
              keep_cast_pad: bool = False, cross_host_groups: Iterable[str] = ()) -> List[Region]:
    """Load several region files as one set through the C loader
    (magi_aot/load.h), the way `magi-aot load A B ...` does: every file
    verified (each artifact section hashed and decompressed once), one
    symmetric-buffer plan over all of them (a weight shared by two regions
    gets one slot), the rewrite. Returns one Region per path, in order; they
    share one LoadedSet (Region.loaded), which keeps the C loader and its
    plan alive for a SymmRuntime.

    transport: None (default) takes each region's
    compile_config["fsdp_config"]["transport"], else "nccl"; "nccl" keeps the
    NCCL gathers (and turns magi.symm_* gathers of an earlier rewrite back);
    "copy_engine" rewrites the gathers of static weights.
    rank, world: this process's rank and the world size (process groups of
    consecutive ranks); with them the load is this rank's view: each
    placeholder read through to_local becomes the rank's shard (rank_local,
    default True when world is given), the DTensor weight gathers of a
    SimpleFSDP region are lowered for this rank (docs/SYMM.md), and each
    Region's `redistributes` lists every redistribute with its decision.
    keep_cast_pad: lowered gathers keep their cast and pad in the graph (on
    NCCL) instead of a copy-engine load doing them once at bind.
    cross_host_groups: process-group names whose members span hosts: their
    gathers stay on NCCL with reason "cross_host" (a SymmRuntime finds them
    from the ranks' hosts, runtime/hosts.py).
    Raises MagiError naming the file on any failure."""
    _check_transport(transport)
    names = [os.fspath(p) for p in paths]
    arr = (c_char_p * max(1, len(names)))(*[cstr(p) for p in names])
    regions = _run_loader(lambda ld: lib.magi_loader_load(ld, arr, len(names)), transport=transport,
                          window_cap_bytes=window_cap_bytes, rank=rank, world=world, rank_local=rank_local,
                          keep_cast_pad=keep_cast_pad, cross_host_groups=cross_host_groups)
    for p, reg in zip(names, regions):
        _warn_ignored(p, reg.ignored, "Region.ignored lists it")
    return regions


def load(path: StrPath, *, transport: Optional[str] = None, rank: Optional[int] = None,
         world: Optional[int] = None, rank_local: Optional[bool] = None, keep_cast_pad: bool = False) -> Region:
    """Load one region file (magi-fx JSON, artifact v1 or legacy v0; the C
    library picks by content and verifies every digest before parsing).
    Same as load_many([path], ...)[0]."""
    return load_many([path], transport=transport, rank=rank, world=world, rank_local=rank_local,
                     keep_cast_pad=keep_cast_pad)[0]


def load_buffers(datas: Iterable[bytes], names: Sequence[str], **kw: Any) -> List[Region]:
    """load_many() for region bytes held in memory: datas[i] (bytes) is
    read as the file names[i] (which stands for it in reports and
    messages). The keyword options are load_many's."""
    _check_transport(kw.get("transport"))
    blobs = [bytes(d) for d in datas]
    n = len(blobs)
    bufs = [ctypes.create_string_buffer(d, len(d)) for d in blobs]
    ptrs = (c_void_p * max(1, n))(*[ctypes.cast(b, c_void_p) for b in bufs])
    sizes = (c_size_t * max(1, n))(*[len(d) for d in blobs])
    cnames = (c_char_p * max(1, n))(*[cstr(x) for x in names])
    regs = _run_loader(lambda ld: lib.magi_loader_load_buffers(ld, ptrs, sizes, cnames, n), **kw)
    for r in regs:
        r.path = None
    return regs


def load_bytes(data: bytes, *, transport: Optional[str] = None, name: str = "artifact") -> Region:
    """Same as load() for region bytes held in memory (e.g. from a cache)."""
    return load_buffers([data], [name], transport=transport)[0]


def load_bytes_with_sections(data: bytes, kind: int = SECTION_COMPILED, *, transport: Optional[str] = None,
                             name: str = "artifact") -> Tuple[Region, List[bytes]]:
    """load_bytes() and the artifact's opaque sections of `kind` (default:
    the stored compiled code) from the same verified read: (Region,
    [section bytes]). The C loader opens the artifact once and checks every
    section's digest once; each section is decompressed once
    (LoadedSet.sections)."""
    region = load_buffers([data], [name], transport=transport)[0]
    loaded, i = region.loaded, region.loaded_index
    if loaded is None or i is None:   # never for a region the loader made
        raise MagiError(-1, "%s: the load kept no loader to read its sections from" % name)
    return region, loaded.sections(i, kind)


def _build(creg: CRegion, path: Optional[str], t0: float) -> Region:
    fp = creg.fingerprint() if has("magi_fingerprint_hex") else None
    ins, ins_err = None, None
    if has("magi_inputs_write_json"):
        try:
            ins = json.loads(creg.inputs_json(False))
        except MagiError as e:  # e.g. placeholders without metadata: still loadable
            ins_err = e
    doc = docio.document(creg.ptr)  # marshal, not JSON text (docio.py)
    return Region(doc, path=path, fingerprint=fp, inputs=ins, skipped_legacy=creg.dropped_legacy(),
                  ignored=creg.ignored(), load_seconds=time.perf_counter() - t0,
                  inputs_error=ins_err)


def region_from_doc(doc: Doc, *, transport: Union[None, str, Literal[False]] = False) -> Region:
    """Check a magi-fx document with the C reader and return it as a Region.
    With a transport (None, "nccl", "copy_engine": see load_many) it also
    goes through the loader's plan and rewrite."""
    if transport is not False:
        return load_bytes(_dumps(doc).encode("utf-8"), transport=transport, name="document")
    t0 = time.perf_counter()
    with CRegion.from_json_text(_dumps(doc)) as r:
        return _build(r, None, t0)


def _localized(region: Region, rank: Optional[int] = None, world: Optional[int] = None) -> Region:
    """Region.localized(): magi_localize_rank on a copy of the region's
    document, for `rank` of `world` (consecutive ranks); without them the
    tracing rank's view (magi_localize)."""
    t0 = time.perf_counter()
    if (rank is None) != (world is None):
        raise ValueError("localize: give rank= and world= together (or neither: the tracing rank's view)")
    with CRegion.from_json_text(_dumps(region.doc)) as r:
        n = c_uint32()
        if world is None or rank is None:
            lib.magi_localize(byref(n), r.ptr)
        else:
            cfg = SymmBackendConfig(version=struct_version(SymmBackendConfig.REVISION, SymmBackendConfig),
                                    rank=int(rank), world=int(world))
            lib.magi_localize_rank(byref(n), r.ptr, byref(cfg))
        out = _build(r, region.path, t0)
    out.fingerprint = region.fingerprint  # of the region as read
    for k in ("transport", "transport_source", "rewrite_report", "bind_report", "n_rewritten",
              "n_restored", "redistributes", "n_lowered", "skipped_legacy", "ignored"):
        setattr(out, k, getattr(region, k))
    out.source = region
    return out


def _dumps(doc: Doc) -> str:
    # allow_nan=False: the spec has no NaN literal (the walk writes
    # {"float": "nan"}); default=str keeps an odd compile_config value.
    return json.dumps(doc, allow_nan=False, default=str, separators=(",", ":"))


def _warn_ignored(what: str, ignored: Iterable[str], hint: str) -> None:
    """One warning per unknown key a reader skipped (its JSON path)."""
    import warnings
    for key in ignored:
        warnings.warn("%s: unknown key %s skipped (%s)" % (what, key, hint), stacklevel=3)


def save_doc(doc: Doc, path: StrPath, *, strict: bool = False) -> Doc:
    """Validate a magi-fx document with the C reader and write it atomically:
    as magi-fx JSON when `path` ends in .json, else as an artifact v1.
    Unknown keys are skipped with a warning naming each by its JSON path
    (strict=True refuses them: MagiError); a dtype outside the library's
    table or a symbol the document does not declare is refused
    (magi_region_check_names), naming the node and field.
    Returns {"path", "bytes", "fingerprint", "nodes"}."""
    where = os.fspath(path)
    with CRegion.from_json_text(_dumps(doc), strict=strict) as r:
        lib.magi_region_check_names(r.ptr)
        _warn_ignored(where, r.ignored(), "strict=True refuses it")
        if where.endswith(".json"):
            text = r.to_json_text(pretty=True).encode("utf-8")
            lib.magi_write_file_atomic(cstr(where), text, len(text))
        else:
            r.save(where)
        fp = r.fingerprint() if has("magi_fingerprint_hex") else None
        return {"path": where, "bytes": os.path.getsize(where), "fingerprint": fp,
                "nodes": r.struct.n_nodes}


def save(gm: torch.fx.GraphModule, path: StrPath, *, model_tag: str, model_idx: int = 0,
         traced_files: Iterable[str] = (), compile_config: Optional[Doc] = None, strict: bool = False) -> Doc:
    """Walk a torch.fx.GraphModule (metadata only, never tensor data) and save
    it (see save_doc; strict: refuse unknown keys, e.g. a misspelt
    compile_config["fsdp_config"]["transport"])."""
    from .fx import graph_to_doc
    doc = graph_to_doc(gm, model_tag=model_tag, model_idx=model_idx,
                       traced_files=traced_files, compile_config=compile_config)
    return save_doc(doc, path, strict=strict)


def fingerprint(path_or_gm: Union[StrPath, bytes, Doc, torch.fx.GraphModule]) -> str:
    """Canonical structural fingerprint (hex) of a file, a GraphModule or a
    magi-fx document dict. Symbol names are noise: two ranks whose graphs
    differ only by a consistent renaming get the same value."""
    if isinstance(path_or_gm, dict):
        doc = path_or_gm
    elif isinstance(path_or_gm, (str, bytes, os.PathLike)):
        with CRegion.from_file(os.fspath(path_or_gm)) as r:
            return r.fingerprint()
    elif hasattr(path_or_gm, "graph"):
        from .fx import graph_to_doc
        doc = graph_to_doc(path_or_gm, model_tag="fingerprint")
    else:
        raise TypeError("fingerprint() takes a path, a GraphModule or a magi-fx dict")
    with CRegion.from_json_text(_dumps(doc)) as r:
        return r.fingerprint()


def _inputs_of_doc(doc: Doc, concrete: bool) -> List[Doc]:
    with CRegion.from_json_text(_dumps(doc)) as r:
        return json.loads(r.inputs_json(concrete))


def inputs(path: StrPath, concrete: bool = False) -> List[Doc]:
    """One descriptor per placeholder, as the C library builds them
    (magi_inputs_write_json): {"index", "node", "name", "target",
    "example_value"} plus, with concrete=True, "concrete" (shape/stride/
    storage_offset, or value) evaluated under the symbol hints.
    Raises MagiError MAGI_ERR_MISSING_META naming every placeholder without
    metadata, MAGI_ERR_UNBACKED (concrete) naming symbol and placeholder."""
    with CRegion.from_file(os.fspath(path)) as r:
        return json.loads(r.inputs_json(concrete))
