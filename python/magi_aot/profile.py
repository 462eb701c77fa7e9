"""Cost-table profiler: measure each node of a region at its hints and write
the table under the canonical keys the scheduler reads (docs/FINGERPRINT.md,
"Measured tables: the profiler").

    python -m magi_aot.profile REGION --out TABLE.json [--report R.json]
        [--device cuda|cpu] [--iters N]
    magi-aot schedule REGION --costs TABLE.json

Keys come from the C library (`magi-aot costs REGION --json`, one per node),
never from Python, so a table always matches what `schedule --costs` looks
up. Values, in microseconds:

* compute nodes: the node's target called on real tensors built from the
  metadata of its inputs at the hints (unbacked symbols take the values the
  analytical model assumes, from `magi-aot schedule --json`), median of
  `iters` CUDA-event-timed calls (host clock on the CPU);
* weight all-gathers (`all_gather_into_tensor[_coalesced]` and, under the
  copy-engine rewrite's keys, `magi.symm_all_gather[_coalesced]`): the
  gathered bytes moved from `group` source shards into the output by one
  device-to-device copy per shard. The NCCL key gets the copies issued one
  by one; the copy-engine key gets them captured once into a CUDA graph and
  replayed (what the backend's graph path does), and `issue:KEY` the host
  time of one replay. On CUDA the copy-engine key is the replay's time
  *beside compute* (on a side stream while matrix multiplies hold the
  compute stream: where the schedule puts a gather), its time alone kept as
  `alone:KEY` (`--alone`: price it alone). On one GPU shared by several
  ranks such copies share the SMs with the compute and take several times
  their time alone, and the schedule then launches them that much earlier.
  On one GPU a multi-rank NCCL all-gather cannot run (NCCL refuses two
  ranks on one device), so the NCCL key is this copy proxy too; the report
  says "copy proxy" for every such value;
* nodes that cost nothing by the model (views, getitem, to_local,
  wait_tensor, symbolic scalars) and other collectives are not measured:
  they keep the analytical value (the report lists them with the reason).

Several nodes with one key (the same work) give the median of their
measurements. The table is written atomically; the report (optional) lists
every node with its key, value and method.
"""
from __future__ import annotations

import json
import math
import os
import ctypes
import sys
import tempfile
import time
from ctypes import POINTER, byref, c_uint32, c_void_p
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ._lib import COST_MODEL_UNBACKED_HINT, CRegion, MagiError, UnbackedGuess, lib
from .optable import classify, is_gather
from . import region as _region
from .region import load

if TYPE_CHECKING:
    from .region import Doc, StrPath

__all__ = ["node_keys", "symm_node_keys", "unbacked_values", "build_table", "write_table",
           "profile", "main"]

TABLE_FORMAT = "magi-cost-table"
TABLE_VERSION = 1


# ------------------------------------------------ what the library says

def _keys_of(creg_ptr: Any) -> List[Optional[str]]:
    """The cost key of every node of a C region (magi_cost_keys), None where
    a node has none."""
    ks = c_void_p()
    lib.magi_cost_keys(byref(ks), creg_ptr)
    try:
        out: List[Optional[str]] = []
        for i in range(lib.magi_cost_keyset_node_count(ks)):
            k = lib.magi_cost_keyset_node_key(ks, i)
            out.append(k.decode() if k is not None else None)
        return out
    finally:
        lib.magi_cost_keyset_free(ks)


def node_keys(path: StrPath) -> List[Optional[str]]:
    """The cost key of every node of the region file (None: no key), as
    the library computes them (what `magi-aot costs --json` prints)."""
    with CRegion.from_file(os.fspath(path)) as r:
        return _keys_of(r.ptr)


def symm_node_keys(path: StrPath) -> Optional[List[Optional[str]]]:
    """The keys of the same nodes after the copy-engine rewrite (gathers of
    resident shards become magi.symm_*; indices do not change), or None when
    the region cannot be rewritten (the reason is not an error here)."""
    try:
        region = load(path, transport="copy_engine")
    except MagiError:
        return None
    s = region.loaded
    assert s is not None  # a Region a load made has its LoadedSet
    return _keys_of(c_void_p(lib.magi_loader_region(s.handle, region.loaded_index)))


def unbacked_values(path: StrPath) -> Dict[str, int]:
    """{symbol: value} the analytical model assumes for unbacked symbols
    (magi_cost_unbacked_guesses, what `magi-aot schedule --json` lists as
    "unbacked"), so a profile measures the sizes the model prices."""
    with CRegion.from_file(os.fspath(path)) as r:
        g, n = c_void_p(), c_uint32()
        lib.magi_cost_unbacked_guesses(byref(g), byref(n), r.ptr, COST_MODEL_UNBACKED_HINT)
        try:
            arr = ctypes.cast(g, POINTER(UnbackedGuess))
            return {arr[i].name.decode(): int(arr[i].value) for i in range(n.value)}
        finally:
            if g:
                lib.magi_free(g)


# --------------------------------------------------------------- the table

def _median(values: Iterable[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def build_table(measured: Mapping[str, Iterable[float]]) -> Dict[str, float]:
    """{key: [us, ...]} -> {key: median us}. Keys must be non-empty strings
    and values finite and >= 0 (what the C reader accepts); anything else is
    a ValueError naming the key."""
    out: Dict[str, float] = {}
    for key, given in measured.items():
        if not isinstance(key, str) or not key:
            raise ValueError("cost key %r is not a non-empty string" % (key,))
        vals = list(given)
        if not vals:
            raise ValueError("cost key %s: no measurement" % key)
        for v in vals:
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError("cost key %s: %r is not a finite cost >= 0" % (key, v))
        out[key] = float(_median(vals))
    return out


def write_table(path: StrPath, table: Mapping[str, float]) -> None:
    """Write {"format": "magi-cost-table", "version": 1, "costs": table}
    atomically (a temporary file in the same directory, then rename)."""
    checked = build_table({k: [v] for k, v in table.items()})
    doc = {"format": TABLE_FORMAT, "version": TABLE_VERSION, "costs": dict(sorted(checked.items()))}
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".magi-costs-", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------- measuring (torch)

def _last(target: Optional[str]) -> str:
    return (target or "").rsplit(".", 1)[-1]


def _skip_reason(node: Doc) -> Optional[str]:
    """Why a node is not measured (None: measure it). What is free, a
    gather, a wait or another collective is the library's operator table's
    word (magi_aot.optable), the one the analytical model prices by."""
    op, t = node["op"], node.get("target") or ""
    if op in ("placeholder", "output", "get_attr"):
        return "no key"
    cls = classify(op, t)
    if cls == "wait":
        return "free by the model (wait)"
    if cls == "free":
        return "free by the model (%s)" % _last(t)
    if cls == "collective":
        return "collective other than a gather: needs a process group"
    return None


class _Values:
    """Real values built from the region's metadata at the hints."""

    def __init__(self, torch: Any, nodes: List[Doc], hints: Dict[str, Any], device: str) -> None:
        from .fx import expr as _expr
        self.torch, self.nodes, self.hints, self.device = torch, nodes, hints, device
        self._expr = _expr
        self.by_name = {n["name"]: n for n in nodes}
        self.cache: Dict[str, Any] = {}

    def dim(self, d: Any) -> Any:
        return d if isinstance(d, int) else self._expr.eval_int(d, self.hints)

    def example(self, ex: Optional[Doc]) -> Any:
        torch = self.torch
        if ex is None:
            return None
        k = ex.get("kind")
        if k == "tensor":
            shape = [self.dim(d) for d in ex["shape"]]
            stride = [self.dim(d) for d in ex["stride"]] if ex.get("stride") is not None else None
            dtype = getattr(torch, ex["dtype"])
            if stride is not None and len(stride) == len(shape):
                t = torch.empty_strided(shape, stride, dtype=dtype, device=self.device)
            else:
                t = torch.empty(shape, dtype=dtype, device=self.device)
            if t.is_floating_point():
                t.normal_(0, 0.1)
            else:
                t.zero_()
            return t
        if k in ("symint", "symbool"):
            return self.dim(ex["expr"]) if k == "symint" else bool(self.dim(ex["expr"]))
        if k == "symfloat":
            return float(ex["expr"]) if isinstance(ex["expr"], (int, float)) else 1.0
        if k in ("int", "float", "bool"):
            return ex.get("value")
        if k in ("tuple", "list"):
            items = [self.example(x) for x in ex.get("items", [])]
            return tuple(items) if k == "tuple" else items
        return None

    def of_node(self, name: str) -> Any:
        if name not in self.cache:
            node = self.by_name[name]
            self.cache[name] = self.example((node.get("meta") or {}).get("example_value"))
        return self.cache[name]

    def arg(self, v: Any) -> Any:
        torch = self.torch
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.arg(x) for x in v]
        (tag, x), = v.items()
        if tag == "node":
            return self.of_node(x)
        if tag == "tuple":
            return tuple(self.arg(y) for y in x)
        if tag == "dict":
            return {k: self.arg(y) for k, y in x.items()}
        if tag == "slice":
            return slice(*(self.arg(y) for y in x))
        if tag in ("dtype", "layout", "memory_format"):
            return getattr(torch, x)
        if tag == "device":
            return torch.device(self.device) if str(x).startswith("cuda") else torch.device(x)
        if tag == "float":
            return float(x)
        if tag == "ellipsis":
            return Ellipsis
        if tag == "sym":
            return self.dim(x)
        raise ValueError("argument %s cannot be built" % (v,))


def _has_tensor(torch: Any, v: Any) -> bool:
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(torch, x) for x in v)
    if isinstance(v, dict):
        return any(_has_tensor(torch, x) for x in v.values())
    return False


class _Timer:
    def __init__(self, torch: Any, device: str) -> None:
        self.torch = torch
        self.cuda = str(device).startswith("cuda")

    def time(self, fn: Callable[[], object], iters: int) -> float:
        """Median microseconds of fn() (device time on CUDA)."""
        torch = self.torch
        for _ in range(2):
            fn()
        t: List[float]
        if not self.cuda:
            t = []
            for _ in range(iters):
                a = time.perf_counter()
                fn()
                t.append((time.perf_counter() - a) * 1e6)
            return _median(t)
        torch.cuda.synchronize()
        t = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            t.append(a.elapsed_time(b) * 1e3)
        return _median(t)

    def host(self, fn: Callable[[], object], iters: int) -> float:
        """Median host microseconds of issuing fn() (the device drained first)."""
        t = []
        for _ in range(iters):
            if self.cuda:
                self.torch.cuda.synchronize()
            a = time.perf_counter()
            fn()
            t.append((time.perf_counter() - a) * 1e6)
        if self.cuda:
            self.torch.cuda.synchronize()
        return _median(t)


def _gather_inputs(vals: _Values, node: Doc) -> List[Tuple[Any, int]]:
    """[(shard tensor, group)] of a gather node (coalesced: one per input)."""
    args = node.get("args", [])
    inp = vals.arg(args[0]) if args else vals.arg((node.get("kwargs") or {}).get("input"))
    group = args[1] if len(args) > 1 else (node.get("kwargs") or {}).get("group_size")
    if not isinstance(group, int) or group < 1:
        raise ValueError("group size %r" % (group,))
    shards = inp if isinstance(inp, (list, tuple)) else [inp]
    return [(s, group) for s in shards]


def _measure_gather(torch: Any, timer: _Timer, vals: _Values, node: Doc,
                    iters: int) -> Tuple[float, Optional[float], Optional[float], float, Any]:
    """(copies us, graph us, graph issue us, plain issue us, the graph);
    graph values are None off CUDA."""
    srcs: List[Any] = []
    outs: List[Any] = []
    pairs: List[Tuple[Any, Any]] = []
    for shard, group in _gather_inputs(vals, node):
        shard = shard.contiguous()
        rows = shard.shape[0] if shard.dim() else 1
        out = torch.empty((group * rows,) + tuple(shard.shape[1:]), dtype=shard.dtype, device=shard.device)
        for j in range(group):
            src = shard.clone()
            srcs.append(src)
            pairs.append((out[j * rows:(j + 1) * rows], src))
        outs.append(out)

    def copies() -> None:
        for d, s in pairs:
            d.copy_(s)

    plain = timer.time(copies, iters)
    plain_issue = timer.host(copies, iters)
    if not timer.cuda:
        return plain, None, None, plain_issue, None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        copies()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        copies()
    graph = timer.time(g.replay, iters)
    graph_issue = timer.host(g.replay, iters)
    return plain, graph, graph_issue, plain_issue, g


class _Matmuls:
    """The compute a copy is timed beside: bf16 4096^3 matrix multiplies,
    their operands made and one of them timed once per profile."""

    def __init__(self, torch: Any) -> None:
        n = 4096
        self.a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.mm(self.a, self.b)
        e1.record()
        e1.synchronize()
        self.us = max(e0.elapsed_time(e1) * 1e3, 1.0)


def _beside_compute(torch: Any, mm: _Matmuls, replay: Callable[[], object], alone_us: float, iters: int) -> float:
    """Median device microseconds of replay() on a side stream while the
    compute stream runs matrix multiplies that outlast it (queued first,
    released together): what a copy costs where the schedule puts it,
    under compute. On one GPU shared by several ranks a "peer" copy is a
    same-device copy, which shares the SMs with the compute and can take
    several times its time alone; between GPUs it is a copy-engine read
    and this stays near the time alone."""
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    k = int(min(max(40 * alone_us / mm.us, 4), 2000))  # compute well past the copy, even slowed 40x
    ts = []
    for _ in range(max(iters // 2, 3)):
        torch.cuda.synchronize()
        start = torch.cuda.Event()
        torch.cuda._sleep(2_000_000)  # hold the GPU while both streams are queued
        start.record()
        for _ in range(k):
            torch.mm(mm.a, mm.b)
        c0, c1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(side):
            side.wait_event(start)
            c0.record()
            replay()
            c1.record()
        main.wait_stream(side)
        torch.cuda.synchronize()
        ts.append(c0.elapsed_time(c1) * 1e3)
    return _median(ts)


def profile(path: StrPath, *, device: str = "cuda", iters: int = 20, log: Optional[Callable[[str], object]] = None,
            only: Optional[Set[str]] = None,
            beside_compute: bool = True) -> Tuple[Dict[str, List[float]], List[Dict[str, Any]]]:
    """Measure every node of the region file (`only`: a set of node names to
    restrict it to; beside_compute: on CUDA, the copy-engine keys are
    priced at their time beside matrix multiplies, their time alone kept
    as `alone:KEY`; False: alone). Returns (measured, report):
    measured {key: [us...]} (build_table() makes the table) and one report
    row per node {index, name, key, symm_key, us, issue_us, method}."""
    import torch
    keys = node_keys(path)
    skeys: List[Optional[str]] = symm_node_keys(path) or [None] * len(keys)
    reg = _region.load(path, transport="nccl")
    hints = {k: v for k, v in reg.symbols.items() if v is not None}
    hints.update(unbacked_values(path))
    nodes = reg.nodes
    if len(nodes) != len(keys):
        raise RuntimeError("%s: %d nodes but %d keys" % (path, len(nodes), len(keys)))
    vals = _Values(torch, nodes, hints, device)
    timer = _Timer(torch, device)
    from .fx.rebuild import resolve_target
    measured: Dict[str, List[float]] = {}
    matmuls: Optional[_Matmuls] = None  # made at the first gather timed beside compute
    report: List[Dict[str, Any]] = []

    def put(key: Optional[str], us: Optional[float]) -> None:
        if key is not None and us is not None:
            measured.setdefault(key, []).append(us)

    for i, n in enumerate(nodes):
        key, skey = keys[i], skeys[i] if i < len(skeys) else None
        row: Dict[str, Any] = {"index": i, "name": n["name"], "key": key, "symm_key": skey, "us": None,
                               "issue_us": None}
        reason = "no key" if key is None else _skip_reason(n)
        if not reason and only is not None and n["name"] not in only:
            reason = "not selected"
        if reason or key is None:
            row["method"] = "not measured: %s" % (reason or "no key")
            report.append(row)
            continue
        try:
            t = n.get("target") or ""
            if is_gather(n["op"], t):
                plain, graph, graph_issue, plain_issue, g = _measure_gather(torch, timer, vals, n, iters)
                put(key, plain)
                put("issue:" + key, plain_issue)
                beside = None
                if skey and skey != key:
                    if g is not None and graph is not None and beside_compute:
                        matmuls = matmuls or _Matmuls(torch)
                        beside = _beside_compute(torch, matmuls, g.replay, graph, iters)
                        put("alone:" + skey, graph)
                    put(skey, beside if beside is not None else graph if graph is not None else plain)
                    put("issue:" + skey, graph_issue if graph_issue is not None else plain_issue)
                row.update(us=plain, issue_us=plain_issue, graph_us=graph, graph_issue_us=graph_issue,
                           beside_compute_us=beside,
                           method="copy proxy (one device copy per shard; graph replay for the copy-engine key%s)"
                           % (", timed beside matrix multiplies" if beside is not None else ""))
            else:
                args = [vals.arg(a) for a in n.get("args", [])]
                kwargs = {k: vals.arg(a) for k, a in (n.get("kwargs") or {}).items()}
                if not _has_tensor(torch, args) and not _has_tensor(torch, kwargs):
                    row["method"] = "not measured: no tensor input (symbolic scalar)"
                    report.append(row)
                    continue
                fn: Callable[[], object]
                if n["op"] == "call_method":
                    fn = lambda: getattr(args[0], t)(*args[1:], **kwargs)  # noqa: E731
                else:
                    f = resolve_target(t)
                    fn = lambda: f(*args, **kwargs)  # noqa: E731
                with torch.no_grad():
                    us = timer.time(fn, iters)
                put(key, us)
                row.update(us=us, method="event-timed" if timer.cuda else "host-timed")
        except Exception as e:  # one node's failure never loses the others
            row["method"] = "failed: %s: %s" % (type(e).__name__, e)
            if log:
                log("node %d %s: %s" % (i, n["name"], row["method"]))
        report.append(row)
    return measured, report


def main(argv: Optional[List[str]] = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m magi_aot.profile", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("region")
    ap.add_argument("--out", required=True, help="cost table to write (magi-cost-table JSON)")
    ap.add_argument("--report", help="per-node report (JSON)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", help="comma-separated node names to measure (default: all)")
    ap.add_argument("--alone", action="store_true",
                    help="price copy-engine gathers at their time alone, not beside compute")
    a = ap.parse_args(argv)
    if a.iters < 1:
        ap.error("--iters must be >= 1")

    def log(msg: str) -> None:
        print("profile: " + msg, file=sys.stderr)

    only = set(a.only.split(",")) if a.only else None
    measured, report = profile(a.region, device=a.device, iters=a.iters, log=log, only=only,
                               beside_compute=not a.alone)
    table = build_table(measured)
    write_table(a.out, table)
    if a.report:
        with open(a.report, "w") as f:
            json.dump({"region": a.region, "device": a.device, "iters": a.iters, "nodes": report}, f, indent=1)
    n_meas = sum(1 for r in report if r.get("us") is not None)
    n_fail = sum(1 for r in report if str(r.get("method", "")).startswith("failed"))
    print("profile %s: %d nodes measured, %d failed, %d keys written to %s" % (
        a.region, n_meas, n_fail, len(table), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
