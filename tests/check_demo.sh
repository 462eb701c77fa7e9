#!/usr/bin/env bash
# The README's demo end to end (scripts/demo.sh BUILD_DIR), and the benefit
# it must show a new user, not only the mechanics: for every region, the
# time to produce it from its JSON against the time a fresh process takes
# to load its artifact, and what the figures leave out.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bash "$root/scripts/demo.sh" "$@" >"$log" 2>&1
rc=$?
cat "$log"
[ "$rc" -eq 0 ] || exit "$rc"
fail() { echo "check_demo: $*"; exit 1; }
grep -q '^== 3. what a fresh process saves' "$log" || fail "no step that shows what a fresh process saves"
grep -Eq '^  region +save from JSON +load artifact' "$log" || fail "no header naming both timed sides"
for f in "$root"/fixtures/real/*.json; do
  name=$(basename "$f" .json)
  grep -Eq "^  $name +[0-9]+\.[0-9] ms +[0-9]+\.[0-9] ms  " "$log" || fail "no timing row for $name"
done
grep -q 'the same clock' "$log" || fail "does not say both sides are timed by the same clock"
grep -q 'Dynamo trace that wrote each JSON is not run' "$log" || fail "does not say what the figures leave out"
grep -q '^== 5. a real model: what a new process saves' "$log" || fail "no step that shows what a new process saves on a real model"
if ! grep -q '^  (skipped: ' <(sed -n '/^== 5\./,$p' "$log"); then
  grep -Eq '^  a new process saves [0-9]+\.[0-9] s of compile' "$log" ||
    fail "step 5 ran but does not say the seconds a new process saves"
  grep -Eq 'code path direct' "$log" || fail "step 5: the new process did not load the stored code directly"
fi
echo "check_demo: the demo shows save-from-JSON against fresh-process load for every region"
echo "check_demo: and the seconds a new process saves on a real model (or why it was skipped)"
