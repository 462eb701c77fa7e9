"""One process set of SymmRuntime.compile: 4 ranks (threads of this
process, a FileStore, the host backend) run a seeded synthetic region of
copy-engine gathers (test_schedule_golden._synthetic) through the code that
rt.compile serves from a shared cache directory (CI: runtime_code_ci.py).

    python3 python/tests/runtime_code_ranks.py --dir DIR --cache CACHE --out NAME
        [--schedule auto|off] [--max-inflight BYTES] [--read-order]

Every rank binds its own seeded shards, calls rt.compile(0, CACHE) (one
rank at a time, in rank order: Inductor's settings are process-wide), then all run the
returned callable together on the same seeded input. DIR/NAME.json:
{"ranks": {r: {"served", "reason", "key", "code_path", "overlap",
"lowerings": Inductor graph lowerings during the call (0: no Inductor
compile), "compile_s", "schedule_mode", "max_inflight_bytes": the
schedule's bound, "order": the scheduled node
names, "close_to_eager"}}, "fresh_overlap": with --read-order, code_overlap
of rank 0's region compiled by compile_fx as a user would (the launch-order
pass installed)}; DIR/NAME.pt: {rank: outputs}. Exit 0 when every rank
finished.
"""
import argparse
import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
W = 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--schedule", default="auto", choices=("auto", "off"))
    ap.add_argument("--max-inflight", type=int, default=0)
    ap.add_argument("--read-order", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    import torch
    import magi_aot
    from magi_aot.runtime import SymmRuntime
    from torch.distributed import FileStore
    import torch._inductor.graph as ind_graph
    import test_schedule_golden as golden

    lowerings = [0]
    real_init = ind_graph.GraphLowering.__init__

    def counting(self, *args, **kw):
        lowerings[0] += 1
        real_init(self, *args, **kw)
    ind_graph.GraphLowering.__init__ = counting

    region = magi_aot.region_from_doc(golden._synthetic(seed=2, layers=3))
    work = os.path.join(a.dir, a.out + ".work")
    os.makedirs(os.path.join(work, "rdzv"))
    store = FileStore(os.path.join(work, "store"), W)
    turn = threading.Condition()
    next_rank = [0]   # ranks compile one at a time, in rank order
    gate = threading.Barrier(W, timeout=300)
    res, outs, errors = {}, {}, {}
    fresh = {}

    def rank(r):
        rt = SymmRuntime([region], device="cpu", rank=r, world=W, store=store, new_groups=False,
                         timeout=120, rendezvous_base=os.path.join(work, "rdzv"),
                         schedule=False if a.schedule == "off" else "auto",
                         max_inflight_bytes=a.max_inflight)
        try:
            g = torch.Generator().manual_seed(100 + r)
            rt.bind({s["weight"]: torch.randn(s["shape"], generator=g) for s in rt.slots})
            rt.ready()
            with turn:
                if not turn.wait_for(lambda: next_rank[0] == r, timeout=600):
                    raise TimeoutError("rank %d: the ranks before it did not finish compiling" % r)
            try:
                if a.read_order and r == 0:
                    from torch._inductor.compile_fx import compile_fx
                    from magi_aot.compile.launch_order import compile_and_read, install
                    install()   # Inductor's settings are per thread
                    _, fresh["overlap"], _ = compile_and_read(
                        lambda: compile_fx(rt.graph_module(), rt.fake_inputs(0)))
                before = lowerings[0]
                fn, rep = rt.compile(0, a.cache)
                n = lowerings[0] - before
            finally:
                with turn:
                    next_rank[0] += 1
                    turn.notify_all()
            x = torch.randn(4, 32, generator=torch.Generator().manual_seed(7))
            args = rt.args(0, {"x": x})
            gate.wait()
            got = fn(*args)
            eager = rt.graph_module()(*args)
            gate.wait()     # every peer keeps its windows until all have gathered
            eager = list(eager) if isinstance(eager, (list, tuple)) else [eager]
            outs[r] = got
            res[r] = {"served": rep["served"], "reason": rep["reason"], "key": rep["key"],
                      "code_path": rep["code_path"], "overlap": rep["overlap"], "lowerings": n,
                      "published": rep["published"], "untrusted": rep["untrusted"],
                      "compile_s": rep["timings"].get("compile_s"),
                      "total_s": rep["timings"].get("total_s"),
                      "schedule_mode": rt.schedule_report["mode"],
                      "max_inflight_bytes": (rt.schedule_report["regions"] or [{}])[0].get(
                          "max_inflight_bytes"),
                      "order": [nd.name for nd in rt.graph_module().graph.nodes],
                      "close_to_eager": all(torch.allclose(o, e, rtol=1e-4, atol=1e-4)
                                            for o, e in zip(got, eager))}
        except BaseException as e:  # noqa: BLE001 - reported below
            gate.abort()
            errors[r] = "%s: %s" % (type(e).__name__, e)
        finally:
            rt.close()

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(W)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    torch.save(outs, os.path.join(a.dir, a.out + ".pt"))
    with open(os.path.join(a.dir, a.out + ".json"), "w") as f:
        json.dump({"ranks": res, "errors": errors, "fresh_overlap": fresh.get("overlap")}, f)
    if errors or len(res) != W:
        print("errors: %s" % errors, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
