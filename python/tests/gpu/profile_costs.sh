#!/usr/bin/env bash
# Measured cost tables on the GPU and the schedule on them, vs the
# analytical model (docs/FINGERPRINT.md, "Measured tables").
#   MAGI_AOT_LIB=.../libmagi_aot.so MAGI_CLI=.../magi-aot \
#     bash python/tests/gpu/profile_costs.sh OUTDIR
# (bench/gpu_cuda.sh runs it with the library it built.) For each region:
# python -m magi_aot.profile on cuda -> OUTDIR/NAME.costs.json (+ per-node
# report), then `magi-aot schedule` without and with --costs; the summary
# (OUTDIR/summary.txt) lists, per gather, the predicted cost and exposed
# time under both, and the compute totals. PROFILE_DEVICE / PROFILE_ITERS
# (default cuda / 20) let it run on the CPU as a check of the script.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUTD=${1:-${OUT:-/tmp/magi-profile}}
mkdir -p "$OUTD"
: "${MAGI_CLI:?set MAGI_CLI to the magi-aot executable}"
: "${MAGI_AOT_LIB:?set MAGI_AOT_LIB to libmagi_aot.so}"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
rc=0
for name in fsdp_block block mixed; do
    f=fixtures/real/$name.json
    timeout 60 "$PY" -m magi_aot.profile "$f" --out "$OUTD/$name.costs.json" --report "$OUTD/$name.report.json" \
        --device "${PROFILE_DEVICE:-cuda}" --iters "${PROFILE_ITERS:-20}" >"$OUTD/$name.profile.log" 2>&1 || { echo "profile $name: FAILED"; tail -5 "$OUTD/$name.profile.log"; rc=1; continue; }
    "$MAGI_CLI" schedule "$f" --json >"$OUTD/$name.sched.analytical.json" 2>"$OUTD/$name.sched.err" || rc=1
    "$MAGI_CLI" schedule "$f" --costs "$OUTD/$name.costs.json" --json >"$OUTD/$name.sched.measured.json" \
        2>>"$OUTD/$name.sched.err" || rc=1
    "$MAGI_CLI" costs "$f" --json >"$OUTD/$name.costs.analytical.json" 2>/dev/null
    "$MAGI_CLI" costs "$f" --costs "$OUTD/$name.costs.json" --json >"$OUTD/$name.costs.measured.json" 2>/dev/null
done
"$PY" - "$OUTD" <<'PYEOF' | tee "$OUTD/summary.txt"
import json, os, sys
d = sys.argv[1]
def load(p):
    try:
        with open(os.path.join(d, p)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
for name in ("fsdp_block", "block", "mixed"):
    a, m = load(name + ".sched.analytical.json"), load(name + ".sched.measured.json")
    ca, cm = load(name + ".costs.analytical.json"), load(name + ".costs.measured.json")
    rep = load(name + ".report.json")
    if not (a and m and ca and cm and rep):
        print("== %s: no result (see %s.profile.log)" % (name, name)); continue
    nodes = rep["nodes"]
    meas = sum(1 for n in nodes if n.get("us") is not None)
    fail = [n for n in nodes if str(n.get("method", "")).startswith("failed")]
    print("== %s: %d nodes measured, %d failed; estimator with the table: %s (%s)" % (
        name, meas, len(fail), m["estimator"]["source"], m["estimator"]["reason"]))
    for n in fail[:5]:
        print("   failed: %s: %s" % (n["name"], n["method"]))
    print("   total: analytical %.1f us, measured table %.1f us (%d measured, %d analytical nodes)" % (
        ca["total_us"], cm["total_us"], cm["measured"], cm["analytical"]))
    print("   %-34s %-4s | %10s %10s %8s | %10s %10s %8s" % ("gather", "kind", "model us", "exposed", "verdict",
                                                          "meas. us", "exposed", "verdict"))
    mg = {g["node"]: g for g in m["gathers"]}
    for g in a["gathers"]:
        h = mg.get(g["node"], {})
        print("   %-34s %-4s | %10.1f %10.1f %8s | %10.1f %10.1f %8s" % (
            g["node"], g["kind"], g["cost_us"], g["exposed_us"], g["verdict"], h.get("cost_us", float("nan")),
            h.get("exposed_us", float("nan")), h.get("verdict", "?")))
    issue = [n for n in nodes if n.get("graph_issue_us") is not None]
    for n in issue:
        print("   %-34s copy proxy %.1f us (issue %.1f us); graph replay %.1f us (issue %.1f us)" % (
            n["name"], n["us"], n["issue_us"], n["graph_us"], n["graph_issue_us"]))
    print("   simulated: analytical %.1f us, measured %.1f us" % (a["simulated_us"], m["simulated_us"]))
PYEOF
exit $rc
