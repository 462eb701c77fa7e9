"""A mixed bucket through magi::symm_all_gather_coalesced, 4 rank processes.

    python3 python/tests/bucket_ranks.py --device cpu  --dir DIR   # host backend (CI: runtime_ci.py)
    python3 python/tests/bucket_ranks.py --device cuda --dir DIR   # cuda backend, ranks on GPU r % count

The bucket is tests/symm_data/synth_bucket.json: two transformer layers of
q k v o [16,64], gate up [44,64], down [16,176], two bf16 norms [16] and an
fp32 scale [16] per rank (20 inputs, 4 size classes over two windows).
Every rank binds its shards (randn, different per rank and slot), gathers
the bucket twice through the operator and checks: every output bit-exact
against the concatenated shards of all ranks; contiguous, of the gathered
shape and dtype; the outputs in one flat buffer, class by class (each
class's outputs back to back at pitch world x nbytes, classes in order of
first appearance, 256-aligned); a storage of its own per output (no
aliasing); an output kept after the others were freed stays intact while
memory is reused and the bucket gathered again. Each rank writes
DIR/rank<r>.json ({"rank", "ok", "calls", "host_us_per_call", the medians
of host time per call with and without the wait_tensor calls,
"implementation": the kernels that served}); exit 0 when
every rank passed. With --device cuda the operator runs on the current
stream and the outputs are read back after a synchronize.
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
W = 4


def rank_main(rank, tmp, device):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import magi_aot
    import magi_aot.runtime.ops
    from magi_aot.runtime import SymmRuntime
    from torch.distributed import FileStore

    if device == "cuda":
        device = "cuda:%d" % (rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    region = magi_aot.load(os.path.join(ROOT, "tests", "symm_data", "synth_bucket.json"), transport="copy_engine")
    rt = SymmRuntime([region], device=device, rank=rank, world=W, store=FileStore(os.path.join(tmp, "store"), W),
                     new_groups=False, timeout=120, rendezvous_base=os.path.join(tmp, "rdzv"))

    def shard(r, i):  # different per rank and slot, no NaN
        sl = rt.slots[i]
        g = torch.Generator().manual_seed(1000 * r + i)
        return torch.randn(sl["shape"], generator=g).to(getattr(torch, rt.windows[sl["window"]]["dtype"]))

    bound = rt.bind({sl["weight"]: shard(rank, i).to(device) for i, sl in enumerate(rt.slots)})
    rt.ready()
    names = ["l%d_%s" % (l, n) for l in range(2)
             for n in ("q", "k", "v", "o", "gate", "up", "down", "n1", "n2", "ls")]
    weights = ["L_self_parameters_%s_" % n for n in names]
    slots = [rt._slot_of[w] for w in weights]

    def want(i):
        return torch.cat([shard(r, slots[i]).reshape(-1).view(torch.uint8) for r in range(W)])

    def sync():
        if rt.device.type == "cuda":
            torch.cuda.synchronize(rt.device)

    def check(outs, what):
        sync()
        assert len(outs) == len(weights), what
        for i, o in enumerate(outs):
            sh = rt.slots[slots[i]]["shape"]
            assert list(o.shape) == [W * sh[0]] + sh[1:] and o.is_contiguous(), (what, i, o.shape)
            assert o.dtype == bound[weights[i]].dtype and o.device == rt.device, (what, i)
            got = o.reshape(-1).view(torch.uint8).cpu()
            assert torch.equal(got, want(i)), "%s: output %d (%s) differs" % (what, i, names[i])
        base = min(o.data_ptr() for o in outs)
        at, seen = 0, []
        for i in range(len(outs)):
            key = (rt.slots[slots[i]]["window"], rt.slots[slots[i]]["nbytes"])
            if key in seen:
                continue
            seen.append(key)
            at = (at + 255) & ~255
            for j in range(len(outs)):
                if (rt.slots[slots[j]]["window"], rt.slots[slots[j]]["nbytes"]) == key:
                    assert outs[j].data_ptr() - base == at, (what, j, outs[j].data_ptr() - base, at)
                    at += W * key[1]
        assert len(seen) == 4, seen
        assert len({o.untyped_storage()._cdata for o in outs}) == len(outs), what + ": outputs share a storage"

    inputs = [bound[w] for w in weights]
    t0 = time.perf_counter()
    outs = torch.ops.magi.symm_all_gather_coalesced(inputs, W, "0")
    host_us = (time.perf_counter() - t0) * 1e6
    check(outs, "first call")
    kept, before = outs[4], outs[4].clone()
    del outs
    gc.collect()
    junk = [torch.full((1 << 16,), 0xA5, dtype=torch.uint8, device=rt.device) for _ in range(64)]
    t0 = time.perf_counter()
    outs2 = torch.ops.magi.symm_all_gather_coalesced(inputs, W, "0")
    host_us = min(host_us, (time.perf_counter() - t0) * 1e6)
    check(outs2, "second call")
    sync()
    assert torch.equal(kept.view(torch.uint8), before.view(torch.uint8)), \
        "a kept output changed after its siblings were freed"
    del junk
    # host time of the operator per call, steady state: N calls, each
    # waited on as a graph would (wait_tensor), the median
    n_timed = int(os.environ.get("MAGI_BUCKET_TIMED_CALLS", "200"))
    wait = torch.ops._c10d_functional.wait_tensor

    def timed(waits, idle=False):
        """Sorted host us per call of n_timed calls, the clock covering the
        call and a wait_tensor on its first `waits` outputs (None: every
        one, as a traced graph does; 1: the one wait a loaded graph holds,
        the loader's wait join; 0: the call alone, every output waited on
        after the clock). idle: the device synchronised before each call,
        outside the clock (the host's own cost, with no queue of earlier
        calls behind it: back to back, a call may wait on the allocator or
        the driver for copies still running)."""
        out = []
        for _ in range(n_timed):
            if idle:
                sync()
            t0 = time.perf_counter()
            o = torch.ops.magi.symm_all_gather_coalesced(inputs, W, "0")
            for x in (o if waits is None else o[:waits]):
                wait(x)
            out.append((time.perf_counter() - t0) * 1e6)
            if waits == 0:
                for x in o:
                    wait(x)
            del o
        sync()
        return sorted(out)

    prof = None
    if os.environ.get("MAGI_BUCKET_PROFILE") and rank == 0:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    times = timed(None)
    if prof:
        prof.disable()
        prof.dump_stats(os.path.join(tmp, "rank0.prof"))
    op_times = timed(0)
    one_times = timed(1)
    idle_times = timed(1, idle=True)
    idle_every = timed(None, idle=True)
    if os.environ.get("MAGI_BUCKET_TORCH_PROFILE") and rank == 0:
        # where the host time goes, CUDA runtime calls included (outside
        # every figure above)
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rt.device.type == "cuda" else [])
        with profile(activities=acts) as p:
            for _ in range(50):
                o = torch.ops.magi.symm_all_gather_coalesced(inputs, W, "0")
                torch.ops._c10d_functional.wait_tensor(o[0])
                del o
            sync()
        with open(os.path.join(tmp, "rank0.torchprof.txt"), "w") as f:
            f.write(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    rt.close()

    def median(xs):
        return round(xs[len(xs) // 2], 1) if xs else None
    with open(os.path.join(tmp, "rank%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "ok": True, "calls": 2, "host_us_per_call": round(host_us, 1),
                   "timed_calls": n_timed,
                   "host_us_median": median(times),
                   "host_us_p90": round(times[int(0.9 * (len(times) - 1))], 1) if times else None,
                   "host_us_op_median": median(op_times),
                   "host_us_one_wait_median": median(one_times),
                   "host_us_idle_one_wait_median": median(idle_times),
                   "host_us_idle_median": median(idle_every),
                   "implementation": magi_aot.runtime.ops.IMPLEMENTATION}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--dir", required=True, help="a fresh directory for the store, rendezvous and results")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank is not None:
        rank_main(a.rank, a.dir, a.device)
        return 0
    os.makedirs(os.path.join(a.dir, "rdzv"), exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--device", a.device, "--dir", a.dir,
                               "--rank", str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for r in range(W)]
    fail = 0
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=450)
        if p.returncode:
            fail = 1
            print("rank %d: exit %d\n%s%s" % (r, p.returncode, out[-2000:], err[-3000:]))
    for r in range(W):
        path = os.path.join(a.dir, "rank%d.json" % r)
        if os.path.exists(path):
            with open(path) as f:
                print(f.read())
    print("bucket_ranks (%s): %s" % (a.device, "FAIL" if fail else "PASS"))
    return fail


if __name__ == "__main__":
    sys.exit(main())
