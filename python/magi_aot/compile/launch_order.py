"""Keep a region's gather launches where its graph puts them when Inductor
compiles it.

A weight gather runs under compute only if it is launched ahead of the
compute it should hide behind; the schedule (magi-aot schedule, the
latest-safe-launch pass) moves each launch there in the FX graph and
leaves the wait at the first use. Inductor, with its defaults, does not
keep that order: its post-grad `reorder_for_locality` moves each node's
producers down to it (carrying the compute that should run under a
gather below the launch), and its peak-memory pass sinks an allocating
node towards its first consumer (a launch lands right before its wait).

`KeepLaunchOrder` is a graph pass that pins every weight-gather launch
(`magi.symm_all_gather[_coalesced]`, and the c10d
`all_gather_into_tensor[_coalesced]` kept beside them) between the last
unfusable compute node before it and the first one after it, through
Inductor's own ordering dependencies (the `control_deps` operator, which
its reordering passes and scheduler honour). It runs as Inductor's
`joint_custom_post_pass` (the last joint-graph pass, run on an inference
graph too, before the post-grad passes) and acts only on graphs that
hold a magi gather: every other graph passes through unchanged.
`install()` puts it there, after any pass the user set (which still runs
first); `magi_aot.runtime.ops.register()` calls it, so a process that can
run the magi operators compiles them in order with Inductor's defaults.

Where this torch has no `control_deps` (`preserve_node_ordering`), the
pass leaves the graph unchanged and `pin_launches` says why.
"""
from __future__ import annotations

__all__ = ["KeepLaunchOrder", "install", "install_unless_chosen", "pin_launches", "code_events", "code_overlap",
           "code_timeline_svg", "compile_and_read",
           "LAUNCH_OPS", "HOOK"]

# Inductor's hook the pass goes into: the last of the joint-graph passes,
# which runs on an inference graph too, before the post-grad passes (whose
# reorder_for_locality moves each node's producers down to it, carrying
# the compute that should run under a gather below its launch)
HOOK = "joint_custom_post_pass"

# the weight-gather launches (namespace, name) the pass pins
LAUNCH_OPS = frozenset({("magi", "symm_all_gather"), ("magi", "symm_all_gather_coalesced"),
                        ("_c10d_functional", "all_gather_into_tensor"),
                        ("_c10d_functional", "all_gather_into_tensor_coalesced")})
_MAGI = frozenset({"symm_all_gather", "symm_all_gather_coalesced"})
# nodes that do no device work of their own: never an anchor
_FREE = frozenset({"wait_tensor", "getitem", "view", "reshape", "_unsafe_view", "permute", "t",
                   "expand", "slice", "select", "alias", "sym_size", "squeeze", "unsqueeze",
                   "as_strided", "detach", "sym_numel", "sym_stride", "sym_storage_offset",
                   "_assert_scalar", "_assert_tensor_metadata", "empty", "empty_strided",
                   "control_deps"})
# compute that Inductor does not fuse into a later kernel: an anchor that
# stays where the graph puts it (a pointwise node may be fused into a
# kernel far below, and an anchor on it would pin nothing)
_HEAVY = frozenset({"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "convolution", "_int_mm",
                    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                    "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
                    "_efficient_attention_forward", "_scaled_dot_product_flash_attention_for_cpu"})
_UUID = "magi-aot-keep-launch-order-3"


def _op(node):
    """(namespace, name) of a call_function node's operator, else None."""
    if node.op != "call_function":
        return None
    t = node.target
    schema = getattr(t, "_schema", None)
    if schema is not None:
        ns, _, name = schema.name.partition("::")
        return ns, name
    return "", getattr(t, "__name__", str(t))


def _is_launch(node):
    return _op(node) in LAUNCH_OPS


def _is_compute(node):
    op = _op(node)
    return op is not None and op not in LAUNCH_OPS and op[1] not in _FREE and \
        not op[1].startswith("sym_")


def _is_heavy(node):
    op = _op(node)
    return op is not None and (op[1] in _HEAVY or (op[0] not in ("aten", "prims", "") and
                                                   op not in LAUNCH_OPS and op[1] not in _FREE))


def _feeds(launch):
    """The nodes that only feed `launch` (its cast, pad, to_local): they
    move with it, so they are never its anchors."""
    out, todo = set(), [a for a in launch.all_input_nodes]
    while todo:
        n = todo.pop()
        if n in out or n.op != "call_function":
            continue
        if all(u is launch or u in out for u in n.users):
            out.add(n)
            todo.extend(n.all_input_nodes)
    return out


def pin_launches(graph):
    """Pin each weight-gather launch of `graph` (an aten-level fx.Graph,
    changed in place) after the last unfusable compute node before it
    (a matmul, an attention, an operator of another library) and before
    the first one after it (its own consumer included: the wait stays
    at first use), else before the first compute node after it. Returns
    {"pinned": {launch: (after or None, before or None)}, "skipped": why
    or None}; a graph without a magi gather is left alone (skipped)."""
    nodes = list(graph.nodes)
    launches = [n for n in nodes if _is_launch(n)]
    if not any(_op(n)[1] in _MAGI for n in launches):
        return {"pinned": {}, "skipped": "no magi gather in the graph"}
    try:
        from torch._inductor.fx_passes.control_dependencies import preserve_node_ordering
        from torch.utils._ordered_set import OrderedSet
    except ImportError as e:
        return {"pinned": {}, "skipped": "this torch has no control_deps (%s)" % e}
    _autograd_passthrough()
    pos = {n: i for i, n in enumerate(nodes)}
    deps = {}
    pinned = {}
    for launch in launches:
        i = pos[launch]
        mine = _feeds(launch)
        later = (n for n in nodes[i + 1:] if _is_compute(n) and n not in mine)
        first = before = None
        for n in later:   # the first heavy node, else the first compute node
            first = first or n
            if _is_heavy(n):
                before = n
                break
        before = before or first
        after = next((n for n in reversed(nodes[:i]) if _is_heavy(n) and n not in mine), None)
        if before is not None:
            deps.setdefault(before, OrderedSet()).add(launch)
        if after is not None:
            deps.setdefault(launch, OrderedSet()).add(after)
        pinned[launch.name] = (after.name if after is not None else None,
                               before.name if before is not None else None)
        # its waits stay after the compute the graph runs under the gather
        # (Inductor would otherwise hoist a wait that frees nothing up to
        # its launch, stalling the stream there)
        for w in [u for u in launch.users if _op(u) == ("_c10d_functional", "wait_tensor")] + \
                [v for u in launch.users if _op(u) == ("", "getitem")
                 for v in u.users if _op(v) == ("_c10d_functional", "wait_tensor")]:
            j = pos[w]
            under = next((n for n in reversed(nodes[i + 1:j]) if _is_heavy(n) and n not in mine), None)
            if under is not None:
                deps.setdefault(w, OrderedSet()).add(under)
    # a node that is both a dependency's target and a dependent is wrapped
    # once; preserve_node_ordering follows the replacements it makes
    preserve_node_ordering(graph, deps)
    return {"pinned": pinned, "skipped": None}


def _autograd_passthrough():
    """PyTorch 2.11's control_deps has no Autograd kernel, and Inductor
    runs the graph through autograd's dispatch on CUDA (inputs that keep
    their autograd state): give it the one later releases have, which runs
    the wrapped operation (ordering is for Inductor's scheduler; eagerly
    the operation just runs). Nothing is replaced where it exists."""
    from torch._C import DispatchKey
    from torch._inductor.fx_passes.control_dependencies import control_deps
    if DispatchKey.Autograd in getattr(control_deps, "py_kernels", {}):
        return

    @control_deps.py_impl(DispatchKey.Autograd)
    def _autograd(additional_deps, subgraph, *args, **kwargs):
        return subgraph(*args, **kwargs)


def _base():
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
        return CustomGraphPass
    except ImportError:  # an old torch: a plain callable (Inductor's cache is then bypassed)
        return object


class KeepLaunchOrder(_base()):  # type: ignore[misc]  # a base chosen at import time
    """The graph pass (see the module doc). `chained`: the pass that
    was configured before this one was installed; it runs first."""

    def __init__(self, chained=None):
        self.chained = chained
        self.last = None   # pin_launches' answer for the last graph seen (tests, reports)

    def __call__(self, graph):
        if self.chained is not None:
            self.chained(graph)
        self.last = pin_launches(graph)

    def uuid(self):
        inner = None
        if self.chained is not None:
            u = getattr(self.chained, "uuid", None)
            inner = u() if callable(u) else repr(self.chained)
        return _UUID if inner is None else "%s+%s" % (inner, _UUID)


def _hook():
    """(Inductor's config module, HOOK's value in this thread), or (None,
    None) where this torch has no Inductor."""
    try:
        import torch._inductor.config as config
    except ImportError:
        return None, None
    return config, getattr(config, HOOK, None)


def install():
    """Put KeepLaunchOrder into Inductor's HOOK (after any pass already
    there); idempotent. Returns the installed pass, or None
    where this torch has no such hook."""
    config, cur = _hook()
    if config is None or isinstance(cur, KeepLaunchOrder):
        return cur
    p = KeepLaunchOrder(cur)
    setattr(config, HOOK, p)
    return p


def install_unless_chosen():
    """install() in the calling thread unless that thread chose HOOK's
    value itself (a pass of its own or None, e.g. under
    `config.patch(joint_custom_post_pass=None)`): the operators' fake
    kernels call it while a compile traces them. Inductor's settings are
    per thread on newer torch (a ContextVar each), so `install()` at
    registration reaches only the registering thread; a worker thread that
    compiles a region gets the pass here, before Inductor reads its passes
    and its cache key. Where settings are process-wide (older torch) the
    registration's install already holds and this does nothing. Returns
    the pass in effect, or None."""
    config, cur = _hook()
    if config is None or isinstance(cur, KeepLaunchOrder):
        return cur
    from contextvars import ContextVar
    entry = getattr(config, "_config", {}).get(HOOK)
    chosen = getattr(entry, "user_override", None)
    if not isinstance(chosen, ContextVar):
        return None      # process-wide settings: the registration decided
    try:
        from torch.utils._config_module import _UNSET_SENTINEL
    except ImportError:
        return None
    if chosen.get() is not _UNSET_SENTINEL:
        return None      # this thread set the hook itself
    return install()


def code_events(source):
    """The gather launches, their waits and the compute kernels of the
    `call()` in Inductor's generated module `source` (its text), in program
    order: [(kind, buffer number or None, line)], kind "launch", "wait" or
    "kernel" (an extern kernel or a fused one)."""
    import re
    body = source[source.index("def call("):] if "def call(" in source else source
    events = []
    for line in body.splitlines():
        t = line.strip()
        if not t or t.startswith("#"):
            continue
        m = re.match(r"buf(\d+) = torch\.ops\.(magi\.symm_all_gather|_c10d_functional\.all_gather)", t)
        if m:
            events.append(("launch", int(m.group(1)), t))
            continue
        w = re.search(r"wait_tensor\.default\(buf(\d+)\)", t)
        if w:
            events.append(("wait", int(w.group(1)), t))
        elif t.startswith(("extern_kernels.", "cpp_fused", "triton_")) or ".run(" in t and "triton" in t:
            events.append(("kernel", None, t))
    return events


def _gather_spans(events):
    """(launch index, first-wait index, buffer number, kernels between) per
    launch, in launch order. A launch assigned bufN owns the waited buffers
    from N up to the next launch's number (a coalesced gather's outputs
    follow it)."""
    numbers = sorted(n for k, n, _ in events if k == "launch")
    spans = []
    for i, (kind, n, _text) in enumerate(events):
        if kind != "launch":
            continue
        nxt = next((m for m in numbers if m > n), None)
        end = next((j for j in range(i + 1, len(events)) if events[j][0] == "wait"
                    and events[j][1] >= n and (nxt is None or events[j][1] < nxt)), len(events))
        spans.append((i, end, n, sum(1 for e in events[i + 1:end] if e[0] == "kernel")))
    return spans


def code_overlap(source):
    """What Inductor's generated module does between each gather launch and
    its wait: [{"launch": line, "buffer": "bufN", "kernels": compute kernels
    (extern kernels and fused kernels) queued between the launch and the
    first wait on one of its outputs, "compute_under": kernels > 0}] in
    launch order, read from the `call()` of `source` (the module's text)."""
    events = code_events(source)
    return [{"launch": events[i][2], "buffer": "buf%d" % n, "kernels": k, "compute_under": k > 0}
            for i, _end, n, k in _gather_spans(events)]


def code_timeline_svg(source, names=None, title=None):
    """The compiled order as SVG: Inductor's `call()` in `source` drawn
    in program order, one step per kernel or gather event: the compute
    lane's kernels, and under it one bar per gather from its launch to its
    first wait (grey: compute queued under it; red: none, the stream waits
    for the whole copy). names: labels of the gathers in launch order
    (default bufN). The schedule's own SVG (magi-aot schedule --timeline)
    simulates the FX order in time; this one shows what Inductor kept."""
    from html import escape
    events = code_events(source)
    spans = _gather_spans(events)
    step, left, lane_h, bar_h = 14, 150, 22, 14
    rows = []  # greedy rows so bars do not overlap
    placed = []
    for i, end, n, k in spans:
        row = next((r for r, last in enumerate(rows) if last < i), None)
        if row is None:
            rows.append(end)
            row = len(rows) - 1
        else:
            rows[row] = end
        placed.append((i, end, n, k, row))
    width = left + step * max(len(events), 1) + 20
    height = 40 + lane_h + 10 + (len(rows) or 1) * (bar_h + 4) + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" '
           'font-size="10">' % (width, height),
           '<text x="4" y="14">%s</text>' % escape(title or "compiled order (Inductor's call())"),
           '<text x="4" y="%d">compute</text>' % (40 + lane_h // 2 + 3)]
    for j, (kind, _n, text) in enumerate(events):
        if kind == "kernel":
            out.append('<rect x="%d" y="40" width="%d" height="%d" fill="#4a7ebb"><title>%s</title></rect>'
                       % (left + j * step, step - 2, lane_h, escape(text[:200])))
    y0 = 40 + lane_h + 10
    out.append('<text x="4" y="%d">gathers</text>' % (y0 + bar_h - 3))
    for g, (i, end, n, k, row) in enumerate(placed):
        label = names[g] if names and g < len(names) else "buf%d" % n
        y = y0 + row * (bar_h + 4)
        w = max(step * (end - i), step // 2)
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %d kernel(s) between '
                   'launch and wait</title></rect>' % (left + i * step, y, w, bar_h,
                                                        "#bbbbbb" if k else "#d9534f", escape(label), k))
        out.append('<text x="%d" y="%d">%s</text>' % (left + i * step + 2, y + bar_h - 3, escape(label[-24:])))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def compile_and_read(compile_fn):
    """Run compile_fn() (an Inductor compile: compile_fx(...)) and read the
    wrapper module it generated: (compile_fn's result, code_overlap of the
    module or None when no module with a gather was generated, the
    module's path or None). The module is the one Inductor loads for the
    compile's call() (Triton's kernels are loaded the same way and are
    passed over)."""
    from unittest import mock
    import torch._inductor.codecache as codecache
    loaded = []
    real = codecache.PyCodeCache.load_by_key_path

    def spy(key, path, *a, **k):
        loaded.append(path)
        return real(key, path, *a, **k)
    with mock.patch.object(codecache.PyCodeCache, "load_by_key_path", spy):
        out = compile_fn()
    for path in reversed(loaded):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        if "def call(" in text and ("symm_all_gather" in text or "all_gather_into_tensor" in text):
            return out, code_overlap(text), path
    return out, None, None
