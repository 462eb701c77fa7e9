#!/usr/bin/env bash
# The main job on the bundled fixtures, in four steps:
#   1. save every real Dynamo region as an artifact (./demo-out/NAME.magi);
#   2. load each artifact back in a new process: one summary row per region
#      (nodes, inputs, sizes, fingerprint, digests verified) and its inputs;
#   3. what a fresh process saves: the time to produce each region again
#      from its magi-fx JSON (`save`) against the time to `load` its artifact,
#      each a new process, timed by the same clock;
#   4. the copy-engine load of fsdp_block: which weight gathers move to the
#      copy engine and which stay on NCCL (and why), then 4 rank processes
#      bind one SymmBuffer and check every rewritten gather byte for byte;
#   5. a real model (transformers' Llama, when torch and transformers are
#      installed): the seconds a new process saves by loading the code the
#      first process compiled and stored (magi_aot.warm_start).
# Usage: bash scripts/demo.sh [BUILD_DIR]   (default: build; configured and
# built here if needed, quietly: only the magi-aot program and libmagi_aot,
# which the Python package of the checkout loads from BUILD_DIR). Output goes to
# ./demo-out (MAGI_DEMO_OUT overrides it; the test suite runs the demo so).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${MAGI_DEMO_OUT:-demo-out}
cli="$build/magi-aot"
mkdir -p "$out"
rm -f "$out"/*.magi "$out"/rank*.log "$out"/rank*.out
rm -rf "$out/rendezvous"

# ---- build only what the demo needs, quietly ----
# (MAGI_DEMO_NO_BUILD=1: use BUILD_DIR/magi-aot as it is; the test suite
# sets it so a test never rebuilds what other tests are running.)
if [ "${MAGI_DEMO_NO_BUILD:-0}" = 1 ]; then
  [ -x "$cli" ] || { echo "no $cli (MAGI_DEMO_NO_BUILD=1)"; exit 1; }
else
printf 'building magi-aot in %s (log: %s/build.log) ... ' "$build" "$out"
{
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DMAGI_BUILD_TESTS=OFF -DMAGI_BUILD_BENCHMARKS=OFF -DMAGI_BUILD_FUZZ=OFF
  fi
  cmake --build "$build" --target magi-aot magi_aot -j"$(nproc)"
} >"$out/build.log" 2>&1 || { echo "failed"; tail -n 30 "$out/build.log"; exit 1; }
echo "done"
fi
echo "using $("$cli" --version)"

# ---- 1. save ----
echo
echo "== 1. save: magi-fx JSON -> artifact (msgpack sections, zstd, SHA-256 each)"
for f in fixtures/real/*.json; do
  "$cli" save "$f" -o "$out/$(basename "$f" .json).magi"
done
echo "saved $(ls "$out"/*.magi | wc -l) artifacts in $out/"

# ---- 2. load each back in a new process ----
echo
echo "== 2. load: each artifact read back by a new process"
printf '%-12s %6s %6s %10s %10s %6s  %-12s  %s\n' region nodes inputs "JSON B" "artifact B" "% JSON" fingerprint digests
for f in fixtures/real/*.json; do
  name=$(basename "$f" .json)
  a="$out/$name.magi"
  info=$("$cli" inspect --json "$a")
  nodes=$(sed -n 's/.*"nodes":\([0-9]*\).*/\1/p' <<<"$info")
  ph=$(sed -n 's/.*"placeholders":\([0-9]*\).*/\1/p' <<<"$info")
  jb=$(stat -c %s "$f")
  ab=$(stat -c %s "$a")
  fp=$("$cli" fingerprint "$a" | cut -c1-12)
  if "$cli" verify "$a" >/dev/null 2>"$out/$name.verify.log"; then ok=ok; else ok=FAILED; fi
  printf '%-12s %6s %6s %10s %10s %5s%%  %-12s  %s\n' "$name" "$nodes" "$ph" "$jb" "$ab" \
    "$(awk -v a="$ab" -v j="$jb" 'BEGIN { printf "%.1f", 100 * a / j }')" "$fp" "$ok"
  [ "$ok" = ok ] || { cat "$out/$name.verify.log"; exit 1; }
done
echo
echo "inputs each region needs, from placeholder metadata alone (first 3 shown):"
for f in fixtures/real/*.json; do
  name=$(basename "$f" .json)
  "$cli" inputs "$out/$name.magi" >"$out/$name.inputs.json"
  total=$(grep -c '"index"' "$out/$name.inputs.json" || true)
  # sed reads every line (no early-exiting head under pipefail: SIGPIPE)
  list=$(grep '"index"' "$out/$name.inputs.json" | sed -n '1,3p' |
    sed -n 's/.*"name": "\([^"]*\)".*"kind":"\([a-z]*\)"\(,"dtype":"\([a-z0-9]*\)","shape":\(\[[^]]*\]\)\)\{0,1\}.*/\1 \4\5 \2/p' |
    sed 's/ tensor$//; s/"//g; s/  */ /g' |
    awk '{ if (length($1) > 24) $1 = substr($1, 1, 21) "..."; print }' | paste -sd ';' | sed 's/;/;  /g')
  more=$(( total > 3 ? total - 3 : 0 ))
  printf '  %-12s %s%s\n' "$name" "$list" "$([ "$more" -gt 0 ] && printf '  (+%d more)' "$more")"
done

# ---- 3. what a fresh process saves ----
# Both sides are one new magi-aot process, timed by bash's EPOCHREALTIME
# (the same clock, process start included in both); median of 5 runs.
echo
echo "== 3. what a fresh process saves: loading the artifact instead of producing the region again"
runs=5
median_ms() { # COMMAND...: median wall time of $runs runs, in ms
  local i t0 t1 ts=()
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    "$@" >/dev/null 2>&1 || { echo "timed command failed: $*" >&2; return 1; }
    t1=$EPOCHREALTIME
    ts+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) * 1000 }')")
  done
  printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(( runs / 2 + 1 ))p"
}
if [ -z "${EPOCHREALTIME:-}" ]; then
  echo "  (skipped: this bash has no EPOCHREALTIME clock; bash 5 or later has)"
else
  printf '  %-12s %16s %16s  %s\n' region "save from JSON" "load artifact" "a fresh process saves"
  tsave=0 tload=0
  for f in fixtures/real/*.json; do
    name=$(basename "$f" .json)
    s_ms=$(median_ms "$cli" save "$f" -o "$out/.timing.magi")
    l_ms=$(median_ms "$cli" load "$out/$name.magi")
    tsave=$(awk -v a="$tsave" -v b="$s_ms" 'BEGIN { print a + b }')
    tload=$(awk -v a="$tload" -v b="$l_ms" 'BEGIN { print a + b }')
    printf '  %-12s %13.1f ms %13.1f ms  %s\n' "$name" "$s_ms" "$l_ms" \
      "$(awk -v s="$s_ms" -v l="$l_ms" 'BEGIN { d = s - l; if (d > 0) printf "%.1f ms (load is x%.1f faster)", d, s / l; else printf "nothing (load is not faster here)" }')"
  done
  rm -f "$out/.timing.magi"
  printf '  %-12s %13.1f ms %13.1f ms  %s\n' all "$tsave" "$tload" \
    "$(awk -v s="$tsave" -v l="$tload" 'BEGIN { d = s - l; if (d > 0) printf "%.1f ms", d; else printf "nothing" }')"
  base=$(median_ms "$cli" --version | awk '{ printf "%.1f", $1 }')
  echo "  Each figure is one new magi-aot process (median of $runs runs, the same clock); a process"
  echo "  that only prints --version takes $base ms of it. 'save from JSON' is the part of producing a"
  echo "  region this demo can run without torch: the Dynamo trace that wrote each JSON is not run"
  echo "  or timed here."
fi

# ---- 4. copy-engine load of fsdp_block ----
echo
echo "== 4. copy-engine load of fsdp_block: FSDP weight gathers"
"$cli" load "$out/fsdp_block.magi" --transport copy_engine >"$out/fsdp_block.load.txt"
printf '  %-34s %-12s %s\n' gather "runs on" why
awk '
  $1 == "rewrite" { g = $2; sub(":$", "", g); to = $NF; sub("^torch.ops.", "", to)
                    printf "  %-34s %-12s %s\n", g, "copy engine", "static weight shard -> " to }
  $1 == "keep"    { g = $2; sub(":$", "", g); why = $0; sub(/^ *keep +[^ ]+ +[^ ]+ +\(/, "", why); sub(/\)$/, "", why)
                    printf "  %-34s %-12s %s\n", g, "NCCL", why }' "$out/fsdp_block.load.txt"
grep '^window' "$out/fsdp_block.load.txt" | sed 's/^/  /'

echo
echo "4 rank processes bind one SymmBuffer (host backend) and check every rewritten gather:"
rdv="$out/rendezvous"
mkdir -m 700 "$rdv"   # private to this job: the rendezvous refuses a directory others can enter
pids=()
for r in 0 1 2 3; do
  "$cli" load "$out/fsdp_block.magi" --transport copy_engine --backend host --rendezvous "$rdv" \
    --rank "$r" --world 4 --check-gathers >"$out/rank$r.out" 2>"$out/rank$r.log" &
  pids+=($!)
done
failed=0
for r in 0 1 2 3; do
  if wait "${pids[$r]}"; then status=0; else status=$?; fi
  summary=$(cat "$out/rank$r.out" "$out/rank$r.log" | grep '^gather check' || true)
  if [ "$status" -ne 0 ] || [ -z "$summary" ]; then
    failed=1
    printf '  rank %d: FAILED (exit %d)\n' "$r" "$status"
    sed 's/^/    /' "$out/rank$r.log"
  else
    printf '  rank %d: %s\n' "$r" "${summary#gather check: }"
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "demo FAILED: not every rank succeeded (logs in $out/)"
  exit 1
fi
echo "all 4 ranks bound the same plan and checked every rewritten gather bit for bit"

# ---- 5. a real model: the compile a new process no longer runs ----
# examples/warm_start.py twice, each a fresh process sharing one magi cache:
# the first traces, compiles and stores; the second loads the stored code.
# Needs torch and transformers in ${PYTHON:-python3}; MAGI_DEMO_WARM=0 skips
# it (the first process compiles: about a minute on 2 cores).
echo
echo "== 5. a real model: what a new process saves (transformers' Llama through magi_aot.warm_start)"
py=${PYTHON:-python3}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export MAGI_AOT_LIB="${MAGI_AOT_LIB:-$PWD/$build/libmagi_aot.so}"
if [ "${MAGI_DEMO_WARM:-1}" = 0 ]; then
  echo "  (skipped: MAGI_DEMO_WARM=0)"
elif ! "$py" -c 'import torch, transformers' >/dev/null 2>&1; then
  echo "  (skipped: $py has no torch and transformers: pip install './python[torch]' transformers)"
else
  cache="$out/warm-cache"
  rm -rf "$cache"
  warm_run() { # a fresh process; its JSON line on stdout, what it says indented
    "$py" examples/warm_start.py "$cache" 2> >(sed 's/^/    /' >&2) | grep '^{'
  }
  first=$(warm_run) || { echo "demo FAILED: the first warm-start process failed"; exit 1; }
  second=$(warm_run) || { echo "demo FAILED: the second warm-start process failed"; exit 1; }
  "$py" - "$first" "$second" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
print("  %-58s %8.2f s (served %s)" % ("first process: trace, compile, store, first output",
                                        a["first_output_s"], a["served"]))
print("  %-58s %8.2f s (served %s, code path %s)" % ("a new process: load the stored code, first output",
                                                     b["first_output_s"], b["served"], b["code_path"]))
print("  %-58s %8.2f s" % ("eager's first output, for scale", b["eager_s"]))
print("  a new process saves %.1f s of compile (model built -> first output; its output"
      % (a["first_output_s"] - b["first_output_s"]))
print("  carries autograd as eager's: %s, within %.1e of eager)" % (b["grad_fn"], b["max_abs_vs_eager"]))
PY
fi
echo "artifacts, load reports and rank logs are in $out/"
