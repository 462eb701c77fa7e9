"""The model zoo: real torchvision and transformers models, built from small
configs with random weights (nothing downloaded), traced with the save
backend, reloaded in a fresh process, rebuilt and run on fake inputs.

Used by test_zoo.py (CPU, a few transformers models, in CI) and
gpu/zoo.py (one H200, the full table). Per region the check is:

  trace process (Dynamo):  the placeholders' metadata (torchcheck.describe_gm),
                           the output tensors' dtype and per-dim hints, the
                           fingerprint of the GraphModule Dynamo handed over;
  fresh process (loader):  cache_get(key) -> the fingerprint, fake_inputs()
                           compared with the placeholders, graph_module() run
                           on the fake inputs, its outputs compared with
                           Dynamo's (dtype, rank, hints; unbacked stays unbacked).

    python3 python/tests/zoo.py check MANIFEST.json   (the fresh process; prints JSON)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")]


# ------------------------------------------------------------------ models
def _tf():
    import transformers
    return transformers


def _ids(torch, batch, seq, vocab, device):
    return torch.randint(0, vocab, (batch, seq), device=device)


def _causal(cls_name, cfg_name, **cfg):
    def build(device, batch, seq):
        import torch
        T = _tf()
        c = getattr(T, cfg_name)(**cfg)
        m = getattr(T, cls_name)(c).to(device).eval()
        ids = _ids(torch, batch, seq, c.vocab_size, device)
        return m, {"input_ids": ids}, [(ids, 0), (ids, 1)]
    return build


def _encdec(cls_name, cfg_name, **cfg):
    def build(device, batch, seq):
        import torch
        T = _tf()
        c = getattr(T, cfg_name)(**cfg)
        m = getattr(T, cls_name)(c).to(device).eval()
        ids = _ids(torch, batch, seq, c.vocab_size, device)
        dec = _ids(torch, batch, max(2, seq // 2), c.vocab_size, device)
        return m, {"input_ids": ids, "decoder_input_ids": dec}, [(ids, 0), (ids, 1), (dec, 0),
                                                                 (dec, 1)]
    return build


def _vision(fn_name, image=64, **kw):
    def build(device, batch, seq):
        import torch
        import torchvision.models as tvm
        import torchvision.models.detection as tvd
        import torchvision.models.segmentation as tvs
        fn = None
        for mod in (tvm, tvs, tvd):
            fn = getattr(mod, fn_name, None)
            if fn is not None:
                break
        m = fn(weights=None, **kw).to(device).eval()
        x = torch.randn(batch, 3, image, image, device=device)
        if fn_name.startswith(("fasterrcnn", "retinanet", "maskrcnn", "ssd", "fcos")):
            return m, {"images": list(x)}, []
        return m, {"x": x}, [(x, 0)]
    return build


TINY = dict(vocab_size=128, max_position_embeddings=128)
DEC = dict(TINY, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
           num_attention_heads=4, num_key_value_heads=2)

# name: (family, builder, positional?) -- the kwargs of the builder feed the model
MODELS = {
    # transformers: decoder-only dense
    "llama": ("decoder", _causal("LlamaForCausalLM", "LlamaConfig", **DEC)),
    "mistral": ("decoder", _causal("MistralForCausalLM", "MistralConfig", **DEC)),
    "qwen2": ("decoder", _causal("Qwen2ForCausalLM", "Qwen2Config", **DEC)),
    "gpt2": ("decoder", _causal("GPT2LMHeadModel", "GPT2Config", vocab_size=128, n_positions=128,
                                n_embd=64, n_layer=1, n_head=4, bos_token_id=0, eos_token_id=0)),
    "phi": ("decoder", _causal("PhiForCausalLM", "PhiConfig", **DEC)),
    # transformers: mixture of experts
    "mixtral": ("moe", _causal("MixtralForCausalLM", "MixtralConfig", num_local_experts=4,
                               num_experts_per_tok=2, **DEC)),
    "qwen2_moe": ("moe", _causal("Qwen2MoeForCausalLM", "Qwen2MoeConfig", num_experts=4,
                                 num_experts_per_tok=2, moe_intermediate_size=64,
                                 shared_expert_intermediate_size=64, **DEC)),
    # transformers: encoder-only
    "bert": ("encoder", _causal("BertModel", "BertConfig", hidden_size=64, intermediate_size=128,
                                num_hidden_layers=1, num_attention_heads=4, **TINY)),
    "roberta": ("encoder", _causal("RobertaModel", "RobertaConfig", hidden_size=64,
                                   intermediate_size=128, num_hidden_layers=1,
                                   num_attention_heads=4, vocab_size=128,
                                   max_position_embeddings=130, pad_token_id=1)),
    # transformers: encoder-decoder
    "t5": ("encdec", _encdec("T5Model", "T5Config", vocab_size=128, d_model=64, d_kv=16, d_ff=128,
                             num_layers=1, num_decoder_layers=1, num_heads=4)),
    "bart": ("encdec", _encdec("BartModel", "BartConfig", vocab_size=128, d_model=64,
                               encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                               decoder_attention_heads=4, encoder_ffn_dim=128,
                               decoder_ffn_dim=128, max_position_embeddings=128)),
    # torchvision (GPU machine only: its wheels need the matching torch)
    "resnet18": ("cnn", _vision("resnet18", num_classes=10)),
    "mobilenet_v3_small": ("cnn", _vision("mobilenet_v3_small", num_classes=10)),
    "efficientnet_b0": ("cnn", _vision("efficientnet_b0", num_classes=10)),
    "vit_b_16": ("vit", _vision("vit_b_16", image=224, num_classes=10)),
    "fcn_resnet50": ("segmentation", _vision("fcn_resnet50", num_classes=4,
                                             weights_backbone=None, aux_loss=False)),
    "fasterrcnn_mobilenet_v3_large_fpn": ("detection", _vision(
        "fasterrcnn_mobilenet_v3_large_fpn", image=128, num_classes=3, weights_backbone=None)),
}

CPU_CI = ("llama", "mixtral", "bert", "t5")


# ------------------------------------------------------- trace and describe
def describe_outputs(gm):
    """Dtype and per-dim (expression, hint) of every tensor output of `gm`,
    read from Dynamo's own FakeTensors."""
    import torch
    import torchcheck
    out = []
    onode = next(n for n in gm.graph.nodes if n.op == "output")
    vals = onode.args[0]
    vals = vals if isinstance(vals, (tuple, list)) else (vals,)
    for v in vals:
        ev = v.meta.get("example_value") if hasattr(v, "meta") else None
        if not isinstance(ev, torch.Tensor):
            out.append(None)
            continue
        out.append({"dtype": str(ev.dtype), "shape": [torchcheck._dim_desc(d) for d in ev.shape]})
    return out


def trace(name, cache_dir, device="cpu", batch=2, seq=16, dynamic=True):
    """Compile `name` with the save backend and run it once. Returns
    (rows, seconds): one row per region Dynamo handed over, with what the
    fresh process must find."""
    import torch
    import torchcheck
    import magi_aot
    torch._dynamo.reset()
    torch.manual_seed(0)
    family, build = MODELS[name]
    model, kwargs, dyn = build(device, batch, seq)
    backend = magi_aot.save_backend(cache_dir, name)
    cap = torchcheck.Capture(backend)
    if dynamic:
        for t, d in dyn:
            torch._dynamo.maybe_mark_dynamic(t, d)
    t0 = time.perf_counter()
    fn = torch.compile(model, backend=cap)
    with torch.no_grad():
        fn(**kwargs)
    secs = time.perf_counter() - t0
    rows = []
    for gm, ent in zip(cap.gms, backend.entries):
        rows.append({
            "model": name, "family": family, "region": ent.model_idx, "key": ent.key,
            "error": ent.error, "fingerprint": ent.fingerprint, "nodes": ent.nodes,
            "bytes": ent.bytes, "save_seconds": ent.save_seconds,
            "placeholders": torchcheck.describe_gm(gm), "outputs": describe_outputs(gm),
            "gm_fingerprint": magi_aot.fingerprint(gm) if ent.error is None else None,
        })
    del fn, model, kwargs, cap
    torch._dynamo.reset()
    return rows, secs


# ---------------------------------------------------------- fresh process
def _compare_outputs(want, got):
    import torch
    from _torch_compat import has_hint, hint_int
    problems = []
    got = got if isinstance(got, (tuple, list)) else (got,)
    if len(want) != len(got):
        return ["%d outputs saved by Dynamo, %d from the rebuilt graph" % (len(want), len(got))]
    for i, (w, g) in enumerate(zip(want, got)):
        if w is None:
            continue
        if not isinstance(g, torch.Tensor):
            problems.append("output %d: not a tensor: %r" % (i, type(g).__name__))
            continue
        if str(g.dtype) != w["dtype"] or g.dim() != len(w["shape"]):
            problems.append("output %d: %s%s vs Dynamo's %s%s" % (i, g.dtype, list(g.shape),
                                                                  w["dtype"], w["shape"]))
            continue
        for k, (wd, gd) in enumerate(zip(w["shape"], g.shape)):
            if "c" in wd:
                ok = not isinstance(gd, torch.SymInt) or has_hint(gd)
                if not ok or int(hint_int(gd)) != wd["c"]:
                    problems.append("output %d dim %d: %s vs Dynamo's %s" % (i, k, gd, wd["c"]))
            elif wd.get("hint") is None:
                if isinstance(gd, torch.SymInt) and has_hint(gd):
                    problems.append("output %d dim %d: Dynamo's %s is unbacked, rebuilt %s has "
                                    "a hint" % (i, k, wd["e"], gd))
            elif hint_int(gd) != wd["hint"]:
                problems.append("output %d dim %d: hint %s vs Dynamo's %s (%s)"
                                % (i, k, hint_int(gd), wd["hint"], wd["e"]))
    return problems


ZOO_LIBRARIES = ("transformers", "torchvision")


def check_rows(cache_dir, rows):
    """Load, rebuild and fake-run every region (this process must not be
    the one that traced them). One result per row."""
    import torchcheck
    from magi_aot.cache import cache_get
    from magi_aot.fx.rebuild import run_fake
    results = []
    for row in rows:
        res = {"model": row["model"], "region": row["region"], "problems": []}
        if row.get("error"):
            res["problems"].append("not saved: " + row["error"])
            results.append(res)
            continue
        try:
            t0 = time.perf_counter()
            r = cache_get(cache_dir, row["key"])
            res["load_seconds"] = time.perf_counter() - t0
            if r.fingerprint != row["fingerprint"] or r.fingerprint != row["gm_fingerprint"]:
                res["problems"].append("fingerprint %s, saved %s, Dynamo's graph %s" % (
                    r.fingerprint, row["fingerprint"], row["gm_fingerprint"]))
            # the model libraries register custom operators when imported
            # (torch.ops.transformers.grouped_mm_fallback): this fresh
            # process imports them only on the explicit opt-in
            out, _, fakes = run_fake(r, allow_targets=ZOO_LIBRARIES)
            res["problems"] += torchcheck.compare(row["placeholders"], r, fakes)
            res["problems"] += _compare_outputs(row["outputs"], out)
        except Exception as e:  # noqa: BLE001 - reported per region
            res["problems"].append("%s: %s" % (type(e).__name__, str(e)[:800]))
        results.append(res)
    return results


def check_elsewhere(cache_dir, rows, workdir):
    """Run check_rows in a fresh interpreter; return its results."""
    manifest = os.path.join(workdir, "zoo_manifest.json")
    with open(manifest, "w") as f:
        json.dump({"cache_dir": cache_dir, "rows": rows}, f)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "check", manifest],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("zoo check process failed (%d): %s" % (proc.returncode,
                                                                  proc.stderr[-3000:]))
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "check":
    with open(sys.argv[2]) as f:
        m = json.load(f)
    print(json.dumps(check_rows(m["cache_dir"], m["rows"])))
