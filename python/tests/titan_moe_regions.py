#!/usr/bin/env python3
"""torchtitan's Qwen3 MoE under plain torch.compile, with graph breaks: its
regions, several starting inside a submodule, run in one SymmRuntime.

    python3 python/tests/titan_moe_regions.py --out DIR [--world 2]

1. save: `world` gloo rank processes build torchtitan 0.3.0's Qwen3 MoE at a
   tiny size (2 layers, 4 experts, vocabulary 1001) wrapped by torchtitan's
   data_parallel(..., "fully_shard") and compile it with plain
   torch.compile and magi_aot.save_backend. A graph break before the
   embedding, the final norm, the output projection and every MoE block
   makes Dynamo compile those modules' own frames: regions whose weights
   Dynamo names from the submodule's `self` (`L_self_parameters_weight_`
   in the embedding, the norm and the output projection). Each rank keeps
   every region's first call: the values of its inputs that are not module
   weights, and its outputs (DIR/rank<r>.io.pt).
2. run: fresh rank processes load every region for their rank with the
   copy-engine transport, put them all in one SymmRuntime (one plan), bind
   the model's parameters by name, run each region's rebuilt graph on the
   recorded inputs and compare with the recorded outputs bit for bit.

Every rank writes DIR/rank<r>.<phase>.json; the driver prints them and a
verdict and exits non-zero when a check failed.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

VOCAB, DIM, HEAD_DIM, LAYERS, EXPERTS = 1001, 64, 16, 2, 4


def build(world):
    """The Qwen3 MoE of this rank, SimpleFSDP over `world` ranks, frozen,
    with a graph break before the modules whose frames are regions of
    their own."""
    import torch
    import titan_model as tm
    tt = tm.import_torchtitan()
    from torchtitan.models import qwen3 as Q
    from torchtitan.models.common import Embedding, Linear
    from torchtitan.models.common.rope import CosSinRoPE
    cfg = Q.Qwen3Model.Config(
        vocab_size=VOCAB, dim=DIM, norm=Q._qwen3_norm(DIM),
        tok_embeddings=Embedding.Config(num_embeddings=VOCAB, embedding_dim=DIM, param_init=Q._EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=DIM, out_features=VOCAB, param_init=Q._LINEAR_INIT),
        layers=Q._build_qwen3_moe_layers(
            fuse_qkv=True, n_layers=LAYERS, dim=DIM, n_heads=4, n_kv_heads=2, head_dim=HEAD_DIM,
            moe_hidden_dim=32, num_experts=EXPERTS, top_k=2, attn_backend="flex",
            rope=CosSinRoPE.Config(dim=HEAD_DIM, max_seq_len=64, theta=1e6), moe_comm_backend="standard"))
    for layer in cfg.layers:
        layer.attention.inner_attention = tt.attention.ScaledDotProductAttention.Config()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(tm.SEED)
        with torch.device("cpu"):
            m = cfg.build()
            m.init_states()
    m = tt.simple_fsdp.data_parallel(m, tm.mesh(world), "fully_shard", tm.mp_policy("fp32"))
    m.eval().requires_grad_(False)

    def graph_break(mod, args):
        torch._dynamo.graph_break()
    for mod in [m.tok_embeddings, m.norm, m.lm_head] + [layer.moe for layer in m.layers.values()]:
        mod.register_forward_pre_hook(graph_break)
    tokens = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(tm.INPUT_SEED))
    return m, tokens


def _is_weight(v):
    import torch
    return isinstance(v, torch.nn.Parameter) or type(v).__name__ == "DTensor"


def _save(args, rank):
    import torch
    import titan_model as tm
    import magi_aot
    tm.init_gloo(rank, args.world, os.path.join(args.out, "store.save"), timeout_s=args.timeout)
    model, tokens = build(args.world)
    io = []

    def recorder(gm, example_inputs):
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        slot = {}
        io.append(slot)

        def run(*a):
            out = gm.forward(*a)
            if not slot:
                slot["inputs"] = {k: v for k, v in zip(names, a) if not _is_weight(v)}
                slot["outputs"] = out
            return out
        return run
    be = magi_aot.save_backend(os.path.join(args.out, "cache"), "qwen3_moe", strict=True, compiler=recorder)
    with torch.no_grad():
        torch.compile(model, backend=be)(tokens)
    torch.save(io, os.path.join(args.out, "rank%d.io.pt" % rank))
    return {"ok": len(be.entries) > 1, "keys": [e.key for e in be.entries], "regions": len(be.entries)}


def _outputs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _run(args, rank):
    import torch
    import titan_model as tm
    from magi_aot.cache import cache_get
    from magi_aot.runtime import SymmRuntime
    tm.init_gloo(rank, args.world, os.path.join(args.out, "store.run"), timeout_s=args.timeout)
    with open(os.path.join(args.out, "rank0.save.json")) as f:
        keys = json.load(f)["keys"]
    io = torch.load(os.path.join(args.out, "rank%d.io.pt" % rank), weights_only=False)
    regions = [cache_get(os.path.join(args.out, "cache"), k, transport="copy_engine", rank=rank,
                         world=args.world) for k in keys]
    rt = SymmRuntime(regions, device="cpu", timeout=args.timeout)
    model, _ = build(args.world)
    rt.bind(dict(model.named_parameters()), strict=True)
    rt.ready()
    weights = {}   # module path -> [(region, target)]
    for i, r in enumerate(rt.regions):
        for p in r.placeholders:
            path = (p["example_value"] or {}).get("module_path")
            if path:
                weights.setdefault(path, set()).add(p["target"])
    exact = []
    for i, region in enumerate(regions):
        gm = rt.graph_module(region)
        with torch.no_grad():
            got = _outputs(gm(*rt.args(region, io[i]["inputs"])))
        want = _outputs(io[i]["outputs"])
        exact.append(len(got) == len(want) and all(
            (torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b) for a, b in zip(got, want)))
    slot_weights = sorted(s["weight"] for s in rt.slots)
    res = {"regions": len(regions), "slots": len(rt.slots), "slot_weights": slot_weights,
           "distinct_gathered_weights": len(set(slot_weights)),
           "weights_named_once": all(len(t) == 1 for t in weights.values()),
           "module_paths": sorted(weights),
           "rewritten": sum(g["reason"] == "rewritten" for r in rt.regions for g in r.rewrite_report),
           "gathers": sum(len(r.rewrite_report) for r in rt.regions),
           "kept": sorted({g["reason"] for r in rt.regions for g in r.rewrite_report
                           if g["reason"] != "rewritten"}),
           "bit_exact": exact}
    res["ok"] = all(exact) and res["weights_named_once"] and res["distinct_gathered_weights"] == res["slots"] \
        and res["rewritten"] == res["gathers"]
    rt.close()
    return res


def _rank_main(args):
    rank = int(os.environ["RANK"])
    try:
        res = _save(args, rank) if args.phase == "save" else _run(args, rank)
    except Exception as e:  # noqa: BLE001 - reported by the driver
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}
    with open(os.path.join(args.out, "rank%d.%s.json" % (rank, args.phase)), "w") as f:
        json.dump(res, f, indent=1)
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
    return 0 if res.get("ok") else 1


def _launch(args, phase):
    procs = []
    for r in range(args.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.world), OMP_NUM_THREADS="1")
        env.pop("LOCAL_RANK", None)
        cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--out", args.out,
               "--world", str(args.world), "--timeout", str(args.timeout)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + args.timeout
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=max(1, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            p.kill()
            logs.append(p.communicate()[0] + "\n[killed after %d s]" % args.timeout)
    out = []
    for r in range(args.world):
        path = os.path.join(args.out, "rank%d.%s.json" % (r, phase))
        out.append(json.load(open(path)) if os.path.exists(path) else {"ok": False, "log": logs[r][-3000:]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=400)
    args = ap.parse_args()
    if args.phase:
        return _rank_main(args)
    os.makedirs(args.out, exist_ok=True)
    for phase in ("save", "run"):
        res = _launch(args, phase)
        for r, x in enumerate(res):
            print("titan_moe_regions %s rank %d: %s" % (phase, r, json.dumps(
                {k: v for k, v in x.items() if k not in ("trace", "log", "slot_weights", "module_paths")})))
        if not all(x.get("ok") for x in res):
            for x in res:
                print(x.get("trace") or x.get("log") or "")
            print("titan_moe_regions: FAIL in %s" % phase)
            return 1
    print("titan_moe_regions: PASS (world %d: every region run bit-exact in one SymmRuntime)" % args.world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
