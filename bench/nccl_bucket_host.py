#!/usr/bin/env python3
"""Host time of torch's NCCL coalesced all-gather on the 20-input bucket's
shapes, the anchor for the symm operator's host time (bucket_ranks.py).

    python3 bench/nccl_bucket_host.py [--calls 1000] [--world 4] [--backend nccl|gloo]

One process, one GPU, a one-rank NCCL group standing for a group of
--world ranks (the inputs are the shards of tests/symm_data/synth_bucket.json,
the outputs world x as large, as torch's functional collective would make
them on `world` ranks: a one-rank group gathers one shard, so the output is
allocated at the bucket's real size by gathering a world-times-larger
input). Each call is `_c10d_functional.all_gather_into_tensor_coalesced`
followed by `wait_tensor` on every output, as a traced graph does; prints
the median host time per call of --calls calls (after 20 warm-up calls),
with and without the waits, and with one wait (on the first output), and
with one wait and with every wait with the device idle at each call
(synchronised outside the clock), timed by the same clock as bucket_ranks.py. --backend gloo runs the same calls on
the CPU (the comparator where there is no NCCL).
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    import magi_aot
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group(args.backend, rank=0, world_size=1)
    region = magi_aot.load(os.path.join(ROOT, "tests", "symm_data", "synth_bucket.json"), transport="copy_engine")
    slots = region.bind_report["slots"]
    wins = region.bind_report["windows"]
    dev = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
    inputs = []
    for sl in slots:
        dt = getattr(torch, wins[sl["window"]]["dtype"])
        shape = [sl["shape"][0] * args.world] + list(sl["shape"][1:])
        inputs.append(torch.randn(shape, device=dev).to(dt))
    group = dist.group.WORLD.group_name
    ag = torch.ops._c10d_functional.all_gather_into_tensor_coalesced
    wait = torch.ops._c10d_functional.wait_tensor
    both, op = [], []
    for i in range(args.calls + 20):
        t0 = time.perf_counter()
        outs = ag(inputs, 1, group)
        t1 = time.perf_counter()
        for o in outs:
            wait(o)
        t2 = time.perf_counter()
        if i >= 20:
            op.append((t1 - t0) * 1e6)
            both.append((t2 - t0) * 1e6)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def timed(waits, idle=False):
        """Sorted host us per call after 20 warm-up calls, the clock covering
        the call and a wait on its first `waits` outputs (None: every one),
        the others waited on after it (torch keeps every output registered);
        idle: the device synchronised before each call, outside the clock."""
        out = []
        for i in range(args.calls + 20):
            if idle:
                sync()
            t0 = time.perf_counter()
            outs = ag(inputs, 1, group)
            k = len(outs) if waits is None else waits
            for o in outs[:k]:
                wait(o)
            t1 = time.perf_counter()
            for o in outs[k:]:
                wait(o)
            if i >= 20:
                out.append((t1 - t0) * 1e6)
        sync()
        return sorted(out)
    one = timed(1)
    idle = timed(1, idle=True)
    idle_every = timed(None, idle=True)
    op.sort()
    both.sort()
    res = {"inputs": len(inputs), "calls": args.calls, "host_us_op_median": round(op[len(op) // 2], 1),
           "host_us_median": round(both[len(both) // 2], 1), "host_us_one_wait_median": round(one[len(one) // 2], 1),
           "host_us_idle_one_wait_median": round(idle[len(idle) // 2], 1),
           "host_us_idle_median": round(idle_every[len(idle_every) // 2], 1),
           "backend": args.backend, "torch": torch.__version__}
    print(json.dumps(res))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
