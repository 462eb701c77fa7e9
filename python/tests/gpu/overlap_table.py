#!/usr/bin/env python3
"""The overlap benchmark's table from titan_e2e.py's run "overlap" (rank
0's rank0.run_overlap.json): per gather, its copy time alone, the stall
measured at its wait with the schedule and without (medians of the timed
forwards), the schedule's predicted stall, and the kernels Inductor queued
between its launch and its wait; then the forward's device time and the
summed stalls of both compiles.

    python3 python/tests/gpu/overlap_table.py DIR/rank0.run_overlap.json
"""
import json
import sys


def short(w):
    return w.replace("L_self_modules_", "").replace("_modules_", ".").replace("_parameters_weight_", "")


def main(path):
    d = json.load(open(path))
    s, u = d["scheduled"], d["unscheduled"]
    pred = {}
    for g in d["schedule"]["predicted"]:
        pred.setdefault(g["weight"], []).append(g)
    print("| gather | copy alone (µs) | stall, scheduled | stall, unscheduled | predicted stall "
          "| kernels under it, scheduled / unscheduled |")
    print("|---|---|---|---|---|---|")
    names = list(s["stall_us"])
    for i, w in enumerate(names):
        p = pred.get(w, [])
        ks = s["kernels_under"][i] if s.get("kernels_under") and i < len(s["kernels_under"]) else "?"
        ku = u["kernels_under"][i] if u.get("kernels_under") and i < len(u["kernels_under"]) else "?"
        print("| %s | %.1f | %.1f | %.1f | %s | %s / %s |" % (
            short(w), d["copy_us"].get(w, float("nan")), s["stall_us"][w], u["stall_us"].get(w, float("nan")),
            " + ".join("%.1f" % g["stall_us"] for g in p) or "?", ks, ku))
    if d.get("beside_matmul_us"):
        print("\n| gather | copy alone (µs) | matmuls queued behind it (µs) | stall at its wait after them (µs) |")
        print("|---|---|---|---|")
        for w, (mm, st) in d["beside_matmul_us"].items():
            print("| %s | %.1f | %.1f | %.1f |" % (short(w), d["copy_us"].get(w, float("nan")), mm, st))
    copy = sum(d["copy_us"].values())
    print("\nforward (device, median of %d): scheduled %.0f µs, unscheduled %.0f µs; exposed: scheduled %.0f µs, "
          "unscheduled %.0f µs, of %.0f µs of copies; outputs equal: %s (max abs %.3g)" % (
              d["iters"], s["forward_us"], u["forward_us"], s["exposed_us"], u["exposed_us"], copy,
              d["outputs_equal"], d["outputs_max_abs"]))
    for n in ("scheduled", "unscheduled"):
        x = d[n]
        print("CUDA graph replay, %s: %s" % (n, "%.0f µs, equal to the compiled forward: %s" % (
            x["graph_forward_us"], x["graph_equal"]) if "graph_forward_us" in x else x.get("graph_error")))


if __name__ == "__main__":
    main(sys.argv[1])
