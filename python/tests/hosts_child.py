"""One rank process of runtime_ci.HostsFourProcesses: a SymmRuntime over
the fsdp_block fixture (group "0": the 4 ranks; group "1": pairs) on the
host MAGI_AOT_HOST_ID names; writes what the runtime planned and whether
the copy-engine gather of group "1" gathered its pair's shards.

    python3 hosts_child.py OUT RANK WORLD STORE RDZV

RDZV is this rank's rendezvous base: the test gives each "host" its own,
so no directory is shared between hosts.
"""
import json
import os
import sys
import traceback


def shard(torch, shape, rank, i):
    g = torch.Generator().manual_seed(1000 * rank + i)
    return torch.randn(shape, generator=g).to(torch.bfloat16)


def main():
    out, rank, world, store_path, rdzv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    res = {"rank": rank, "ok": False}
    try:
        import torch
        from torch.distributed import FileStore
        import magi_aot
        from magi_aot.runtime import SymmRuntime
        from _util import fixture
        region = magi_aot.load(fixture("fsdp_block"), transport="copy_engine")
        rt = SymmRuntime([region], device="cpu", rank=rank, world=world, store=FileStore(store_path, world),
                         new_groups=False, timeout=60, rendezvous_base=rdzv, schedule=False)
        loaded = rt.regions[0]
        res["hosts"] = rt.hosts
        res["cross_host_groups"] = rt.cross_host_groups
        res["windows"] = [(w["group"], w["group_size"]) for w in rt.windows]
        res["reasons"] = {g["name"]: g["reason"] for g in loaded.rewrite_report}
        shards = {s["weight"]: shard(torch, s["shape"], rank, i) for i, s in enumerate(rt.slots)}
        bound = rt.bind(shards)
        rt.ready()
        pair = [rank - rank % 2, rank - rank % 2 + 1]
        names = ["L_self_parameters_expert_a_", "L_self_parameters_expert_b_"]
        idx = {s["weight"]: i for i, s in enumerate(rt.slots)}
        got = torch.ops.magi.symm_all_gather_coalesced([bound[n] for n in names], 2, "1")
        want = [torch.cat([shard(torch, rt.slots[idx[n]]["shape"], q, idx[n]) for q in pair]) for n in names]
        res["pair_gather_exact"] = all(torch.equal(a, b) for a, b in zip(got, want))
        res["ok"] = True
        rt.close()
    except Exception as e:  # noqa: BLE001 - reported to the test
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["trace"] = traceback.format_exc()
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(res, f, indent=1)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
