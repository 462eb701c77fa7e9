#!/usr/bin/env bash
# `magi-aot load` of a torchtitan SimpleFSDP region on 2 rank processes (host
# backend): every rank lists each of the 18 redistributes as lowered (cast at
# bind; the embedding and output weights, 1001 rows, also padded) and rewrites all 18 gathers; with
# --keep-cast-pad each gather stays on NCCL with its reason.
#   bash tests/lower_cli_test.sh CLI FIXTURE
set -euo pipefail
cli=$1 fixture=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # run MODE EXTRA...: both ranks, reports in $tmp/MODE.R
  local mode=$1; shift
  mkdir -m 700 "$tmp/rdv-$mode"
  for r in 0 1; do
    "$cli" load "$fixture" --transport copy_engine --rank $r --world 2 --backend host \
      --rendezvous "$tmp/rdv-$mode" --timeout-ms 60000 "$@" >"$tmp/$mode.$r" 2>&1 &
  done
  wait
}
fail() { echo "lower_cli_test: $*"; for f in "$tmp"/*.[01]; do echo "== $f"; head -40 "$f"; done; exit 1; }
run bind
run keep --keep-cast-pad
for r in 0 1; do
  [ "$(grep -c '^  lower    ' "$tmp/bind.$r")" = 18 ] || fail "rank $r: not 18 lowered redistributes"
  [ "$(grep -c 'cast at bind' "$tmp/bind.$r")" = 18 ] || fail "rank $r: not 18 casts at bind"
  [ "$(grep -c 'padded at bind' "$tmp/bind.$r")" = 3 ] || fail "rank $r: not 3 pads at bind"
  grep -q '18 gathers, 18 rewritten' "$tmp/bind.$r" || fail "rank $r: not every gather rewritten"
  grep -q '18 gathers, 0 rewritten' "$tmp/keep.$r" || fail "rank $r, --keep-cast-pad: a gather was rewritten"
  [ "$(grep -c '^  keep     .*: cast (' "$tmp/keep.$r")" = 15 ] || fail "rank $r: not 15 casts kept"
  [ "$(grep -c '^  keep     .*: pad (' "$tmp/keep.$r")" = 3 ] || fail "rank $r: not 3 pads kept"
done
echo "lower_cli_test: ok"
