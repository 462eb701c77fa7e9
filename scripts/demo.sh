#!/usr/bin/env bash
# The main job on the bundled fixtures: save every real Dynamo region as an
# artifact, then load each one in a separate process and print what was
# loaded (header and sections, inputs, fingerprint, copy-engine load report).
set -euo pipefail
build=${1:-build}
cli="$build/magi-aot"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for f in fixtures/real/*.json; do
  name=$(basename "$f" .json)
  "$cli" save "$f" -o "$out/$name.magi"
  printf '== %s: %s bytes of JSON -> %s bytes of artifact\n' "$name" "$(stat -c %s "$f")" "$(stat -c %s "$out/$name.magi")"
done
for a in "$out"/*.magi; do
  echo
  echo "######## $(basename "$a") (loaded in a new process)"
  "$cli" verify "$a"
  "$cli" inspect "$a"
  echo "-- inputs (concrete where hints allow):"
  "$cli" inputs --concrete "$a" 2>/dev/null || "$cli" inputs "$a"
  echo "-- fingerprint:"
  "$cli" fingerprint "$a"
done
echo
echo "######## copy-engine load of fsdp_block: 4 rank processes bind one SymmBuffer (host backend)"
rdv="$out/rendezvous"
mkdir -p "$rdv"
for r in 1 2 3; do
  "$cli" load "$out/fsdp_block.magi" --transport copy_engine --backend host --rendezvous "$rdv" \
    --rank "$r" --world 4 --check-gathers --json >"$out/rank$r.json" 2>"$out/rank$r.log" &
done
"$cli" load "$out/fsdp_block.magi" --transport copy_engine --backend host --rendezvous "$rdv" \
  --rank 0 --world 4 --check-gathers --json
wait
echo "all 4 ranks bound the same plan and checked every rewritten gather"
