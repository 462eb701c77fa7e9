"""Stored inference code served under grad mode, with eager's autograd.

warm_start stores one compiled graph per region, the inference graph (as
under torch.no_grad()): it is what a directly loaded module runs (no
AOTAutograd, no CompiledArtifact.load). `with_autograd(fn, graph)` serves
it whatever the grad mode:

  - grad off (no_grad, inference_mode), or no tensor input that requires
    grad (integer ids into a model whose parameters are frozen): fn runs
    as is and its outputs carry no autograd, as eager's would not;
  - grad on and some input requires grad (the parameters of a model built
    by from_pretrained, an embedding fed by the caller): fn runs inside an
    autograd.Function, so every floating-point output carries a grad_fn
    and requires grad as eager's does. Its backward recomputes the
    region's forward from `graph()` (the region's graph, run eagerly, with
    autograd) and differentiates that: the gradients are eager's, at the
    cost of one eager forward per backward; nothing is kept from the
    compiled forward but its inputs (what the graph needs to run again).

The recompute's graph is obtained on the first backward only (a process
that never calls backward never rebuilds it); where it cannot be had, the
backward raises MagiError naming why, never returns a wrong gradient.
Double backward (create_graph=True through the recomputed graph) is not
supported: the recompute's own graph is not kept.
"""
import functools

from .._lib import MagiError

__all__ = ["with_autograd", "inference_copy"]


def inference_copy(gm):
    """A GraphModule of its own with gm's graph (the nodes copied, their
    metadata shared) less its grad-mode switches: the graph to compile as
    an inference graph. Dynamo records a torch.no_grad() block in forward
    (transformers' rotary embedding) as _set_grad_enabled(False) ...
    _set_grad_enabled(True), the mode of the traced call; Inductor's passes
    run the graph before AOTAutograd reads the grad mode, so the last switch
    would turn grad back on and make it an autograd graph (two output
    graphs, not loadable directly). Without grad every switch is moot. gm
    itself is left as it is (a backward's recompute runs it, switches
    included)."""
    import torch
    g = torch.fx.Graph()
    g._codegen = gm.graph._codegen
    out = g.graph_copy(gm.graph, {})
    g.output(out)
    for n in list(g.nodes):
        if n.op == "call_function" and n.target is torch._C._set_grad_enabled and not n.users:
            g.erase_node(n)
    copy = torch.fx.GraphModule(gm, g)
    copy.meta = dict(getattr(gm, "meta", None) or {})
    return copy


def _tensor(x):
    import torch
    return isinstance(x, torch.Tensor)


class _Graph:
    """The region's graph, obtained once, on first use; get() raises
    MagiError with the reason it could not be had."""

    def __init__(self, make, what):
        self._make, self._what, self._fn = make, what, None

    def get(self):
        if self._fn is None:
            try:
                self._fn = self._make()
            except MagiError as e:
                raise MagiError(e.code, "%s: backward recomputes the forward from the region's "
                                "stored graph, which cannot be rebuilt: %s"
                                % (self._what, e.message), "backward") from None
        return self._fn


@functools.lru_cache(maxsize=None)
def _function():
    """The autograd.Function class (made on first use: importing this
    module needs no torch)."""
    import torch

    class RegionFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, run, graph, *args):
            ctx.set_materialize_grads(False)
            ctx.graph = graph
            ctx.others = [None if _tensor(a) else a for a in args]
            ctx.save_for_backward(*[a for a in args if _tensor(a)])
            outs = run(*args)
            # an integer or boolean output is not differentiable (autograd
            # knows by its dtype); every other output is a fresh tensor
            return tuple(outs)

        @staticmethod
        def backward(ctx, *grads):
            saved = iter(ctx.saved_tensors)
            args = [next(saved) if o is None else o for o in ctx.others]
            need = ctx.needs_input_grad[2:]
            with torch.enable_grad():
                inputs = [a.detach().requires_grad_(n) if _tensor(a) and n else
                          (a.detach() if _tensor(a) else a) for a, n in zip(args, need)]
                outs = ctx.graph.get()(*inputs)
                if not isinstance(outs, (list, tuple)):
                    outs = (outs,)
                pairs = [(o, g) for o, g in zip(outs, grads)
                         if g is not None and _tensor(o) and o.requires_grad]
                wrt = [x for x, n in zip(inputs, need) if n and _tensor(x)]
                got = iter(torch.autograd.grad([o for o, _ in pairs], wrt,
                                               [g for _, g in pairs], allow_unused=True)
                           if pairs and wrt else [None] * len(wrt))
            return (None, None) + tuple(next(got) if n and _tensor(x) else None
                                        for x, n in zip(inputs, need))

    return RegionFunction


def with_autograd(fn, make_graph, what="the region"):
    """fn(*inputs) -> outputs (an inference graph: no autograd), served with
    eager's autograd semantics (see the module doc). make_graph() returns
    a callable running the region's graph eagerly on the same inputs; it
    is called on the first backward only. what names the region in an
    error. Returns the callable."""
    graph = _Graph(make_graph, what)

    def call(*args):
        import torch
        if torch.is_grad_enabled() and any(_tensor(a) and a.requires_grad for a in args):
            return list(_function().apply(fn, graph, *args))
        return fn(*args)
    call.inference = fn
    return call
