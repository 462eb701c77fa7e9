#!/usr/bin/env bash
# All CPU benchmarks in one go (no GPU needed). Prints one line per figure
# and the command that made it; docs/PERFORMANCE.md quotes this output.
#   bash bench/run_cpu.sh [BUILD_DIR]     (default: build-bench, Release)
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-build-bench}
if [ ! -x "$b/magi-aot" ]; then
  cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$b" -j"$(nproc)" >/dev/null
fi
cli="$b/magi-aot"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { echo "\$ $*"; "$@"; }

echo "## artifact size (stack24: 987 nodes)"
"$cli" save fixtures/real/stack24.json -o "$tmp/s24.magi"
j=$(stat -c %s fixtures/real/stack24.json); a=$(stat -c %s "$tmp/s24.magi")
raw=$("$cli" inspect --json "$tmp/s24.magi" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(s["raw_size"] for s in d["sections"]))' 2>/dev/null || echo "?")
echo "json_bytes=$j artifact_bytes=$a ratio_pct=$(awk "BEGIN{printf \"%.2f\", 100*$a/$j}") decompressed_bytes=$raw"
echo "zstd -3 of the JSON alone: $(zstd -3 -c fixtures/real/stack24.json | wc -c) bytes"

echo; echo "## load (read + verify + decompress + parse into the IR)"
run "$cli" bench load "$tmp/s24.magi" --iters 2000 | tail -1
echo "peak RSS of a whole 'magi-aot dump' process (KiB):"
/usr/bin/time -f "maxrss_kib=%M" "$cli" dump "$tmp/s24.magi" >/dev/null
echo "baseline: peak RSS of 'magi-aot --version' (KiB):"
/usr/bin/time -f "maxrss_kib=%M" "$cli" --version >/dev/null

echo; echo "## the loader (reused) vs open+verify+load, and vs Python's json.loads of the same JSON"
run python3 bench/bench_loader.py --cli "$cli" --iters 2000

echo; echo "## synthetic regions: save and load vs node count"
run "$cli" bench scale --nodes 10000,100000,1000000

echo; echo "## fingerprint (stack24)"
run "$cli" bench fingerprint fixtures/real/stack24.json --iters 2000 | tail -1

echo; echo "## legacy artifact with a 1 GiB example_inputs (skipped, not read)"
run "$cli" bench legacy --fixture fixtures/real/stack24.json --mib 1024 | tail -3

echo; echo "## expressions"
[ -x "$b/tests/bench_expr" ] && run "$b/tests/bench_expr" | tail -8 || echo "(bench_expr not built)"

echo; echo "## host SymmBuffer gather, 4 ranks x 64 MiB"
if [ -x "$b/tests/bench_symm_gather" ]; then run "$b/tests/bench_symm_gather" --iters 10 | tail -3
elif [ -x "$b/bench_symm_gather" ]; then run "$b/bench_symm_gather" --iters 10 | tail -3
else echo "(bench_symm_gather not built)"; fi
