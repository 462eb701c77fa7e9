"""Load, save, fingerprint and describe regions through libmagi_aot.

The split of work: the C library reads and verifies every file (JSON,
artifact v1, legacy v0), computes fingerprints, input descriptors and the
copy-engine rewrite; Python only moves JSON text across the boundary
(magi_json_write / magi_json_read) and turns it into dicts.
"""
import json
import os
import time
from ctypes import byref, c_uint8, c_uint32, c_void_p

from ._lib import CRegion, MagiError, SymmPlanOptions, cstr, has, lib

__all__ = ["Region", "load", "save", "save_doc", "fingerprint", "inputs", "region_from_doc"]


def _example_of(node):
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
      bind_report     {"windows", "slots", "bindings", "plan_sha256"}; None if not run
      n_rewritten     nodes whose target the rewrite changed
      load_seconds    wall time of load() (read + verify + fingerprint + report)
    """

    def __init__(self, doc, *, path=None, fingerprint=None, inputs=None,
                 skipped_legacy=(), ignored=(), rewrite_report=None, bind_report=None,
                 n_rewritten=0, load_seconds=0.0, inputs_error=None):
        self.path = path
        self.doc = doc
        self.fingerprint = fingerprint
        self.inputs = inputs
        self.inputs_error = inputs_error
        self.skipped_legacy = list(skipped_legacy)
        self.ignored = list(ignored)
        self.rewrite_report = rewrite_report
        self.bind_report = bind_report
        self.n_rewritten = n_rewritten
        self.load_seconds = load_seconds
        self.symbol_map = None  # set by fake_inputs(): saved name -> SymInt

    # -- document views
    @property
    def model_tag(self):
        return self.doc.get("model_tag")

    @property
    def model_idx(self):
        return self.doc.get("model_idx")

    @property
    def traced_files(self):
        return list(self.doc.get("traced_files", ()))

    @property
    def compile_config(self):
        return self.doc.get("compile_config")

    @property
    def symbols(self):
        return {k: v.get("hint") for k, v in self.doc.get("symbols", {}).items()}

    @property
    def nodes(self):
        return self.doc["graph"]["nodes"]

    @property
    def placeholders(self):
        out = []
        for i, n in enumerate(self.nodes):
            if n["op"] == "placeholder":
                out.append({"index": len(out), "node": i, "name": n["name"],
                            "target": n.get("target"), "example_value": _example_of(n)})
        return out

    def concrete_inputs(self):
        """Shapes/strides/values evaluated under the symbol hints (C evaluator).
        Raises MagiError MAGI_ERR_UNBACKED naming symbol and placeholder when a
        hint is null."""
        return _inputs_of_doc(self.doc, concrete=True)

    def fake_inputs(self, fake_mode=None, *, device=None):
        """Rebuild the placeholders as FakeTensors / SymInts (see magi_aot.fake)."""
        from .fake import fake_inputs
        return fake_inputs(self, fake_mode, device=device)

    def graph_module(self, *, symbol_values=None):
        """Rebuild the graph as a torch.fx.GraphModule (see magi_aot.rebuild)."""
        from .rebuild import graph_module
        return graph_module(self, symbol_values=symbol_values)

    def __repr__(self):
        return "<magi_aot.Region %s#%s %d nodes fp=%s>" % (
            self.model_tag, self.model_idx, len(self.nodes),
            (self.fingerprint or "?")[:12])


def _str(b):
    return b.decode("utf-8", "replace") if b is not None else None


def _symm(creg, transport):
    """Plan the copy-engine gathers of one region, rewrite it, report."""
    if not has("magi_symm_plan_build"):
        return None, None, 0
    opts = SymmPlanOptions(1, 0 if transport == "copy_engine" else 1, 0, 0)
    plan = c_void_p()
    regions = (c_void_p * 1)(creg.ptr)
    lib.magi_symm_plan_build(byref(plan), regions, 1, byref(opts))
    try:
        n = c_uint32()
        g = lib.magi_symm_plan_gathers(plan, 0, byref(n))
        gathers = []
        for i in range(n.value):
            x = g[i]
            gathers.append({
                "node": x.node, "name": _str(x.name), "from": _str(x.from_), "to": _str(x.to),
                "coalesced": bool(x.coalesced), "already_symm": bool(x.already_symm),
                "reason": _str(lib.magi_symm_reason_name(x.reason)) or str(x.reason),
                "detail": _str(x.detail),
                "slots": [x.slots[k] for k in range(x.n_slots)],
            })
        w = lib.magi_symm_plan_windows(plan, byref(n))
        windows = [{"dtype": _str(w[i].dtype), "group": _str(w[i].group),
                    "group_size": w[i].group_size, "part": w[i].part, "bytes": w[i].bytes,
                    "first_slot": w[i].first_slot, "n_slots": w[i].n_slots}
                   for i in range(n.value)]
        s = lib.magi_symm_plan_slots(plan, byref(n))
        slots = [{"weight": _str(s[i].weight), "window": s[i].window, "offset": s[i].offset,
                  "nbytes": s[i].nbytes, "shape": [s[i].shape[k] for k in range(s[i].ndim)]}
                 for i in range(n.value)]
        b = lib.magi_symm_plan_bindings(plan, 0, byref(n))
        bindings = [{"node": b[i].node, "placeholder": _str(b[i].placeholder), "slot": b[i].slot}
                    for i in range(n.value)]
        digest = (c_uint8 * 32)()
        lib.magi_symm_plan_digest(plan, digest)
        nrew = c_uint32()
        if transport == "copy_engine":
            lib.magi_symm_rewrite(creg.ptr, plan, 0, byref(nrew))
        bind = {"windows": windows, "slots": slots, "bindings": bindings,
                "plan_sha256": bytes(digest).hex()}
        return gathers, bind, nrew.value
    finally:
        lib.magi_symm_plan_free(plan)


def _build(creg, path, transport, t0):
    fp = creg.fingerprint() if has("magi_fingerprint_hex") else None
    ins, ins_err = None, None
    if has("magi_inputs_write_json"):
        try:
            ins = json.loads(creg.inputs_json(False))
        except MagiError as e:  # e.g. placeholders without metadata: still loadable
            ins_err = e
    legacy, ignored = creg.dropped_legacy(), creg.ignored()
    gathers, bind, nrew = (None, None, 0)
    if transport:
        gathers, bind, nrew = _symm(creg, transport)
    doc = json.loads(creg.to_json_text())
    return Region(doc, path=path, fingerprint=fp, inputs=ins, skipped_legacy=legacy,
                  ignored=ignored, rewrite_report=gathers, bind_report=bind,
                  n_rewritten=nrew, load_seconds=time.perf_counter() - t0,
                  inputs_error=ins_err)


def load(path, *, transport="copy_engine"):
    """Load a region file (magi-fx JSON, artifact v1 or legacy v0; the C
    library picks by content and verifies every digest before parsing).

    transport: "copy_engine" (default) plans the symmetric-buffer gathers and
    rewrites the qualifying all-gathers in `doc`; "nccl" only analyses (every
    gather kept, with the reason); None skips the analysis.
    Raises MagiError (with the library's message) on any failure."""
    if transport not in ("copy_engine", "nccl", None):
        raise ValueError("transport must be 'copy_engine', 'nccl' or None")
    t0 = time.perf_counter()
    with CRegion.from_file(os.fspath(path)) as r:
        return _build(r, os.fspath(path), transport, t0)


def load_bytes(data, *, transport="copy_engine"):
    """Same as load() for artifact bytes held in memory (e.g. from a cache)."""
    t0 = time.perf_counter()
    with CRegion.from_artifact_bytes(data) as r:
        return _build(r, None, transport, t0)


def region_from_doc(doc, *, transport=None):
    """Check a magi-fx document with the C reader and return it as a Region."""
    t0 = time.perf_counter()
    with CRegion.from_json_text(_dumps(doc)) as r:
        return _build(r, None, transport, t0)


def _dumps(doc):
    # allow_nan=False: the spec has no NaN literal (the walk writes
    # {"float": "nan"}); default=str keeps an odd compile_config value.
    return json.dumps(doc, allow_nan=False, default=str, separators=(",", ":"))


def save_doc(doc, path):
    """Validate a magi-fx document with the C reader and write it atomically:
    as magi-fx JSON when `path` ends in .json, else as an artifact v1.
    Returns {"path", "bytes", "fingerprint", "nodes"}."""
    path = os.fspath(path)
    with CRegion.from_json_text(_dumps(doc)) as r:
        if path.endswith(".json"):
            text = r.to_json_text(pretty=True).encode("utf-8")
            lib.magi_write_file_atomic(cstr(path), text, len(text))
        else:
            r.save(path)
        fp = r.fingerprint() if has("magi_fingerprint_hex") else None
        return {"path": path, "bytes": os.path.getsize(path), "fingerprint": fp,
                "nodes": r.struct.n_nodes}


def save(gm, path, *, model_tag, model_idx=0, traced_files=(), compile_config=None):
    """Walk a torch.fx.GraphModule (metadata only, never tensor data) and save
    it (see save_doc)."""
    from .fx import graph_to_doc
    doc = graph_to_doc(gm, model_tag=model_tag, model_idx=model_idx,
                       traced_files=traced_files, compile_config=compile_config)
    return save_doc(doc, path)


def fingerprint(path_or_gm):
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


def _inputs_of_doc(doc, concrete):
    with CRegion.from_json_text(_dumps(doc)) as r:
        return json.loads(r.inputs_json(concrete))


def inputs(path, concrete=False):
    """One descriptor per placeholder, as the C library builds them
    (magi_inputs_write_json): {"index", "node", "name", "target",
    "example_value"} plus, with concrete=True, "concrete" (shape/stride/
    storage_offset, or value) evaluated under the symbol hints.
    Raises MagiError MAGI_ERR_MISSING_META naming every placeholder without
    metadata, MAGI_ERR_UNBACKED (concrete) naming symbol and placeholder."""
    with CRegion.from_file(os.fspath(path)) as r:
        return json.loads(r.inputs_json(concrete))
