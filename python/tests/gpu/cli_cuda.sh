#!/usr/bin/env bash
# The CLI's CUDA-facing behaviour on a GPU machine, with MAGI_CLI pointing at
# a magi-aot built with the cuda backend (python/tests/gpu/run.sh builds one):
#   1. --version reports the cuda backend;
#   2. `load --backend cuda` without --world fails with exit 2 and says to
#      start one process per rank with --rank/--world/--rendezvous;
#   3. 4 rank processes bind fsdp_block's windows on the cuda backend and
#      check every rewritten gather; every rank's exit status is checked.
# Usage: MAGI_CLI=build/magi-aot bash python/tests/gpu/cli_cuda.sh [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/magi-cli-cuda}
[ "${1:-}" = --out ] && out=$2
cli=${MAGI_CLI:?set MAGI_CLI to a magi-aot built with the cuda backend}
mkdir -p "$out"
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

v=$("$cli" --version)
check "--version reports the cuda backend ($v)" '[[ $v == *"cuda backend: yes"* ]]'

"$cli" save fixtures/real/fsdp_block.json -o "$out/fsdp_block.magi"
"$cli" load "$out/fsdp_block.magi" --transport copy_engine --backend cuda >"$out/noworld.out" 2>"$out/noworld.err"
rc=$?
check "load --backend cuda without --world: exit 2 (got $rc)" '[ $rc -eq 2 ]'
check "... and says what to pass" 'grep -q -- "--rank R --world N --rendezvous DIR" "$out/noworld.err"'

rdv="$out/rendezvous"
rm -rf "$rdv"
mkdir -m 700 "$rdv"
pids=()
for r in 0 1 2 3; do
  "$cli" load "$out/fsdp_block.magi" --transport copy_engine --backend cuda --rendezvous "$rdv" \
    --rank "$r" --world 4 --check-gathers >"$out/rank$r.out" 2>"$out/rank$r.log" &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[$r]}"
  rc=$?
  check "cuda rank $r exit 0 (got $rc)" '[ $rc -eq 0 ]'
  check "cuda rank $r checked every rewritten gather" 'cat "$out/rank$r.out" "$out/rank$r.log" | grep -q "^gather check: 4 rewritten gathers"'
done
[ $fail -eq 0 ] && echo "cli_cuda: all checks passed" || { echo "cli_cuda: FAILED (logs in $out)"; exit 1; }
