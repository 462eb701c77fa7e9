"""One fresh process of the warm-start test over stock models (CPU, or
the device MAGI_WARM_DEVICE names, e.g. cuda on the GPU machine):

    warm_models_child.py CACHE OUT MODE      MODE: first | second | third

Builds each model of MODELS with a fixed seed (tiny configs, random
weights), binds it with magi_aot.warm_start at the defaults and calls it
as a user would; Inductor's cache directory is fresh, so only the magi
artifact can supply compiled code. Llama is called as the documentation
shows it, without torch.no_grad() (its parameters require grad, as from
from_pretrained), at one length in the first process and at three in
the later ones (the second compiles the new length, the third serves all
from stored code), and a backward through its output is compared with
eager's in the later ones; every other model runs under no_grad. Writes
OUT (JSON: per model the report, how each call was served, the return
types beside eager's, what each check did, the process's compile counts)
and OUT.pt (the returned tensors per model).
"""
import contextlib
import json
import os
import sys
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind-")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE))]

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

import magi_aot  # noqa: E402
import warm_counts  # noqa: E402
from magi_aot._lib import MagiError  # noqa: E402

COUNT = warm_counts.install()
cache, out, mode = sys.argv[1:4]
TINY = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def _hf(cfg, cls, **extra):
    import transformers
    return getattr(transformers, cls)(getattr(transformers, cfg)(**TINY, **extra))


class Gate(nn.Module):
    """x (B, S, D) times a gate (B, 1, D) that broadcasts over S."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, gate):
        return self.fc(x) * torch.sigmoid(gate)


class Keywords(nn.Module):
    """Keyword inputs, a float attribute, a dict with a nested tuple out."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.alpha = 0.5

    def forward(self, x, *, bias=None, mask=None):
        y = self.fc(x) * self.alpha
        if bias is not None:
            y = y + bias
        return {"y": y, "aux": (y.sum(-1), {"mask": mask})}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class Breaks(nn.Module):
    """A data-dependent Python branch between its layers: a graph break in
    forward, so warm_start binds the layers and the head and runs the
    loop and the branch as Python."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 0:
                x = x * 0.5
        return {"y": self.head(x)}


def _ids(n):
    g = torch.Generator().manual_seed(n)
    return torch.randint(0, TINY["vocab_size"], (2, n), generator=g)


def _x(*shape):
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=g)


# name: (build, [calls as (args, kwargs)]); llama: the first process makes the first call only
MODELS = {
    "llama": (lambda: _hf("LlamaConfig", "LlamaForCausalLM"),
              [((_ids(16),), {}), ((_ids(24),), {}), ((_ids(9),), {})]),
    "qwen2": (lambda: _hf("Qwen2Config", "Qwen2ForCausalLM"),
              [((), {"input_ids": _ids(16)}), ((), {"input_ids": _ids(24)})]),
    "mixtral": (lambda: _hf("MixtralConfig", "MixtralForCausalLM", num_local_experts=4,
                            num_experts_per_tok=2), [((_ids(16),), {})]),
    "breaks": (Breaks, [((_x(2, 8, 16),), {}), ((-_x(2, 8, 16),), {})]),
    "gate": (Gate, [((_x(2, 8, 16), _x(2, 1, 16)), {}), ((_x(2, 12, 16), _x(2, 1, 16)), {})]),
    "keywords": (Keywords, [((), {"x": _x(2, 8, 16), "bias": _x(16)}),
                            ((), {"x": _x(2, 12, 16), "bias": _x(16)})]),
}
ONLY = os.environ.get("MAGI_WARM_MODELS")
DEV = torch.device(os.environ.get("MAGI_WARM_DEVICE") or "cpu")


def on_dev(v):
    return pytree.tree_map(lambda x: x.to(DEV) if isinstance(x, torch.Tensor) else x, v)


def leaves(v):
    return [x.detach() for x in pytree.tree_leaves(v) if isinstance(x, torch.Tensor)] + \
        ([t.detach() for layer in getattr(v, "past_key_values").layers
          for t in (layer.keys, layer.values)]
         if getattr(v, "past_key_values", None) is not None else [])


def describe(v):
    return type(v).__name__ + ("(%s)" % ",".join(v.keys()) if isinstance(v, dict) else "")


res, tensors = {"counts": COUNT, "models": {}}, {}
for name, (build, calls) in MODELS.items():
    if ONLY and name not in ONLY.split(","):
        continue
    torch.manual_seed(0)
    model = build().eval().to(DEV)
    calls = [(on_dev(a), on_dev(k)) for a, k in calls]
    grad = name == "llama"   # the documented example, as written: no torch.no_grad()
    if grad and mode == "first":
        calls = calls[:1]
    r = res["models"][name] = {"types": [], "eager_types": [], "max_abs_vs_eager": 0.0,
                               "served_each": []}
    fwd = magi_aot.warm_start(model, cache, name)
    outs = []
    with contextlib.nullcontext() if grad else torch.no_grad():
        for i, (args, kwargs) in enumerate(calls):
            if mode == "first" and name == "qwen2" and i == 0:
                torch._dynamo.mark_dynamic(kwargs["input_ids"], 1)
            got = fwd(*args, **kwargs)
            r["served_each"].append([fwd.report["served"], fwd.report.get("code_path")])
            want = model(*args, **kwargs)
            if grad and i == 0:
                r["requires_grad"] = [got.logits.requires_grad, want.logits.requires_grad]
                r["grad_fn"] = type(got.logits.grad_fn).__name__
                if mode != "first":
                    # a backward through the stored code's output, against eager's
                    got.logits.float().pow(2).mean().backward()
                    mine = [p.grad.clone() for p in model.parameters()]
                    model.zero_grad()
                    want.logits.float().pow(2).mean().backward()
                    r["grad_max_abs_vs_eager"] = max(float((a - p.grad).abs().max())
                                                     for a, p in zip(mine, model.parameters()))
                    model.zero_grad()
            r["types"].append(describe(got))
            r["eager_types"].append(describe(want))
            a, b = leaves(got), leaves(want)
            r["n_leaves"] = [len(a), len(b)]
            r["max_abs_vs_eager"] = max([r["max_abs_vs_eager"]] +
                                        [float((x - y).abs().max()) for x, y in zip(a, b)])
            outs.append(a)
        if mode == "first":
            # the same calls again, once every compile is done: what Dynamo
            # serves now (a call first compiled static is served by the later
            # dynamic code, as in the second process, whose index holds the
            # frame's latest compile)
            tensors[name + "@again"] = [leaves(fwd(*a, **k)) for a, k in calls]
        if name == "keywords":
            # a changed float attribute: Dynamo guarded its value
            model.alpha = 0.25
            args, kwargs = calls[0]
            try:
                got = fwd(*args, **kwargs)
                r["alpha_changed"] = {"served": fwd.report["served"],
                                      "max_abs_vs_eager": float(
                                          (got["y"] - model(*args, **kwargs)["y"]).abs().max())}
            except MagiError as e:
                r["alpha_changed"] = {"error": e.message}
            model.alpha = 0.5
        if name == "llama" and mode == "third":
            # where a deployment must never compile: on_miss="raise" (and
            # MAGI_AOT_ON_MISS=raise) refuses what the stored code cannot
            # serve. A float attribute specialised in the stored code:
            strict = magi_aot.warm_start(model, cache, name, on_miss="raise")
            rot = model.model.rotary_emb
            rot.attention_scaling = 2.0
            try:
                strict(*calls[0][0])
                r["scaling_changed"] = {"served": strict.report["served"]}
            except MagiError as e:
                r["scaling_changed"] = {"error": e.message, "status": e.status}
            rot.attention_scaling = 1.0
            os.environ["MAGI_AOT_ON_MISS"] = "raise"
            strict = magi_aot.warm_start(model, cache, name)
            del os.environ["MAGI_AOT_ON_MISS"]
            try:   # the batch was static in every trace
                strict(_ids(16)[:1].to(DEV))
                r["new_batch"] = {"served": strict.report["served"]}
            except MagiError as e:
                r["new_batch"] = {"error": e.message, "status": e.status}
    rep = dict(fwd.report)
    rep.pop("header", None)
    r["report"] = rep
    tensors[name] = outs
res["dynamo_unique_graphs"] = warm_counts.dynamo_graphs()
res["counted_where"] = warm_counts.WHERE
with open(__file__) as f:
    res["break_line"] = [ln.strip() for ln in f].index("if x.sum() > 0:") + 1
torch.save(tensors, out + ".pt")
with open(out, "w") as f:
    json.dump(res, f, default=str)
print(json.dumps(res, default=str))
