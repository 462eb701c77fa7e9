#!/usr/bin/env python3
"""One artifact for every rank: a region traced once, on rank 0 of a fake
process group, loaded and run by every rank of a real one.

    python3 python/tests/one_artifact.py --out DIR --world 2 [--vocab 1001]

1. trace: rank 0 of a `fake` process group of `world` ranks traces a small
   model with torch.compile and magi_aot.save writes its one region to
   DIR/region.magi. The model has two vocabulary-sized DTensor weights,
   Shard(0) over the mesh (vocab 1001 is uneven on 2 and 4 ranks):
   `emb`, gathered as SimpleFSDP does (redistribute to Replicate(),
   to_local: the loader lowers it to a gather), and `head`, read through
   to_local only (each rank's own rows: the rank-local form gives the
   placeholder the loading rank's shard, from the DTensor spec).
2. run: `world` gloo rank processes build the same model with their own
   shards, run it eagerly (the reference), load DIR/region.magi for their
   rank with the copy-engine transport, bind the model's parameters in a
   SymmRuntime, run the rebuilt graph and compare bit for bit.

Every rank writes DIR/rank<r>.json; the driver prints them, then a verdict,
and exits non-zero when a check failed.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

DIM = 16
SEQ = 8
SEED = 1234


def full_weights(vocab):
    import torch
    g = torch.Generator().manual_seed(SEED)
    return {"emb": torch.randn(vocab, DIM, generator=g), "head": torch.randn(vocab, DIM, generator=g) * 0.1}


def make_model(world, rank, vocab):
    """The model of `rank`: its DTensor parameters hold the rank's chunk
    (torch.chunk rows) of the full weights."""
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    mesh = DeviceMesh("cpu", list(range(world)))
    full = full_weights(vocab)

    def param(t):
        local = t.chunk(world)[rank].contiguous() if rank < len(t.chunk(world)) else t[:0]
        d = DTensor.from_local(local, mesh, [Shard(0)], run_check=False, shape=t.shape, stride=t.stride())
        return nn.Parameter(d, requires_grad=False)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = param(full["emb"])
            self.head = param(full["head"])

        def forward(self, tokens):
            w = self.emb.redistribute(placements=[Replicate()]).to_local()  # as SimpleFSDP gathers
            h = F.embedding(tokens, w)
            z = h @ self.head.to_local().t()         # this rank's columns of the logits
            part = z.exp().sum(-1)
            return fc.all_reduce(part, "sum", dist.group.WORLD) + h.sum(-1)

    return Model()


def tokens(vocab):
    import torch
    return torch.randint(0, vocab, (2, SEQ), generator=torch.Generator().manual_seed(SEED + 1))


def trace(args):
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    import magi_aot
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=args.world)
    try:
        model = make_model(args.world, 0, args.vocab)
        gms = []

        def capture(gm, example_inputs):
            gms.append(gm)
            return gm.forward
        with torch.no_grad():
            torch.compile(model, backend=capture, fullgraph=True)(tokens(args.vocab))
        info = magi_aot.save(gms[0], os.path.join(args.out, "region.magi"), model_tag="one_artifact")
        return {"ok": len(gms) == 1, "nodes": info["nodes"]}
    finally:
        dist.destroy_process_group()


def run(args, rank):
    import torch
    import torch.distributed as dist
    import magi_aot
    from magi_aot.runtime import SymmRuntime
    world = args.world
    dist.init_process_group("gloo", store=dist.FileStore(os.path.join(args.out, "store"), world), rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=args.timeout))
    try:
        model = make_model(world, rank, args.vocab)
        x = tokens(args.vocab)
        with torch.no_grad():
            want = model(x)
        region = magi_aot.load(os.path.join(args.out, "region.magi"), transport="copy_engine", rank=rank,
                               world=world)
        shapes = {p["target"]: (p["example_value"] or {}).get("shape") for p in region.placeholders}
        rt = SymmRuntime([region], device="cpu", timeout=args.timeout)
        rt.bind(dict(model.named_parameters()))
        rt.ready()
        gm = rt.graph_module(region)
        with torch.no_grad():
            out = gm(*rt.args(region, {"tokens": x}))
        out = out[0] if isinstance(out, (tuple, list)) else out
        fake = [list(t.shape) for t in rt.fake_inputs(region) if hasattr(t, "shape")]
        rows = model.head.to_local().shape[0]
        res = {"rank": rank, "head_rows": rows, "placeholder_shapes": shapes, "fake_shapes": fake,
               "lowered": region.n_lowered, "rewritten": region.n_rewritten,
               "bit_exact": bool(out.shape == want.shape and torch.equal(out, want))}
        res["input_head_shape"] = next(i["example_value"]["shape"] for i in region.inputs
                                       if i["target"] == "L_self_parameters_head_")  # the C descriptors
        res["head_shape_is_rank_shard"] = shapes.get("L_self_parameters_head_") == [rows, DIM] \
            and res["input_head_shape"] == [rows, DIM]
        res["ok"] = res["bit_exact"] and res["head_shape_is_rank_shard"] and region.n_lowered == 1 \
            and region.n_rewritten == 1
        dist.barrier()
        rt.close()
        return res
    finally:
        dist.destroy_process_group()


def _child(args):
    rank = int(os.environ.get("RANK", "0"))
    name = "trace" if args.phase == "trace" else "rank%d" % rank
    try:
        res = trace(args) if args.phase == "trace" else run(args, rank)
    except Exception as e:  # noqa: BLE001 - reported by the driver
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0 if res.get("ok") else 1


def _launch(args, phase, n):
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.world), OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--out", args.out,
               "--world", str(args.world), "--vocab", str(args.vocab), "--timeout", str(args.timeout)]
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
    for r in range(n):
        path = os.path.join(args.out, ("trace" if phase == "trace" else "rank%d" % r) + ".json")
        out.append(json.load(open(path)) if os.path.exists(path) else {"ok": False, "log": logs[r][-3000:]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1001)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    if args.phase:
        return _child(args)
    os.makedirs(args.out, exist_ok=True)
    for phase, n in (("trace", 1), ("run", args.world)):
        res = _launch(args, phase, n)
        for r, x in enumerate(res):
            print("one_artifact %s %d: %s" % (phase, r, json.dumps({k: v for k, v in x.items() if k != "trace"})))
        if not all(x.get("ok") for x in res):
            for x in res:
                print(x.get("trace") or x.get("log") or "")
            print("one_artifact: FAIL in %s" % phase)
            return 1
    print("one_artifact: PASS (world %d, vocab %d: one region traced on rank 0, run bit-exact by every rank)"
          % (args.world, args.vocab))
    return 0


if __name__ == "__main__":
    sys.exit(main())
