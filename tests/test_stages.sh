#!/usr/bin/env bash
# scripts/test.sh's stage logic (scripts/stages.sh) on a small CTest
# project whose first stage has a failing, a timed-out and a skipped test:
# the later stages still run, the verdict is the last line printed, names
# the failed tests and the skipped one with its reason, and the status is
# non-zero; MAGI_TEST_TIMEOUT_SCALE (cmake/MagiTestTimeouts.cmake) scales
# the time limits, so the slow test passes under a scale and a bad scale
# stops the configure. test.sh itself does not stop at the first failure.
#   bash tests/test_stages.sh [PYTHON [CTEST [CMAKE]]]
set -uo pipefail
py=${1:-python3} ctest=${2:-ctest} cmake=${3:-cmake}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

mkdir -p "$work/src"
cat >"$work/src/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(stages_probe NONE)
enable_testing()
include($root/cmake/MagiTestTimeouts.cmake)
add_test(NAME passes COMMAND /bin/sh -c "echo fine")
add_test(NAME breaks COMMAND /bin/sh -c "echo 'something broke'; exit 3")
add_test(NAME slow COMMAND /bin/sh -c "sleep 2")
set_tests_properties(slow PROPERTIES TIMEOUT 1)
add_test(NAME needs_gpu COMMAND /bin/sh -c "echo 'skipped: no CUDA device'; exit 77")
set_tests_properties(needs_gpu PROPERTIES SKIP_RETURN_CODE 77)
magi_scale_test_timeouts()
CM
"$cmake" -S "$work/src" -B "$work/b1" >"$work/cfg1.log" 2>&1 || { cat "$work/cfg1.log"; fail "configure"; }

# Three stages: the first fails, the second and third must still run.
out=$(cd "$work" && CTEST=$ctest PYTHON=$py bash -c '
  source "'"$root"'/scripts/stages.sh"
  stage_begin "stage 1: probe"
  stage_ctest "stage 1" b1
  stage_begin "stage 2: after a failure"
  stage_run "stage 2" sh -c "echo stage-two-ran"
  stage_run "stage 3" sh -c "exit 4"
  stage_skip "stage 4" "MAGI_SKIP_X=1"
  stages_verdict' 2>&1)
rc=$?
[ "$rc" != 0 ] || fail "stages_verdict exited 0 after failed stages"
grep -q "stage-two-ran" <<<"$out" || fail "stage 2 did not run after stage 1 failed"
last=$(tail -n 1 <<<"$out")
case "$last" in "==== FAILED (stage 1, stage 3) in "*) ;; *) fail "last line is not the verdict: $last" ;; esac
for want in "2 failed (breaks; slow)" "1 passed" "1 skipped (needs_gpu: no CUDA device)" \
            "stage 2: clean" "stage 3: failed (exit 4)" "stage 4: skipped: MAGI_SKIP_X=1"; do
  grep -qF "$want" <<<"$last" || fail "verdict lacks '$want': $last"
done

# All clean: the passing verdict, status 0.
out=$(PYTHON=$py bash -c 'source "'"$root"'/scripts/stages.sh"; stage_run "stage 1" true; stages_verdict' 2>&1) ||
  fail "a clean run's verdict exited non-zero: $out"
case "$(tail -n 1 <<<"$out")" in "==== ALL PASSED in "*"stage 1: clean") ;; *) fail "clean verdict: $out" ;; esac

# MAGI_TEST_TIMEOUT_SCALE=3 from the environment: the 1 s limit becomes
# 3 s, the slow test passes; -D wins over the environment; a bad value stops.
MAGI_TEST_TIMEOUT_SCALE=3 "$cmake" -S "$work/src" -B "$work/b3" >"$work/cfg3.log" 2>&1 || { cat "$work/cfg3.log"; fail "configure with scale 3"; }
(cd "$work/b3" && "$ctest" -R '^slow$' >/dev/null 2>&1) || fail "the slow test timed out under MAGI_TEST_TIMEOUT_SCALE=3"
limits=$("$ctest" --test-dir "$work/b3" --show-only=json-v1 | "$py" -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    print(t["name"], *[p["value"] for p in t.get("properties", []) if p["name"] == "TIMEOUT"])')
grep -qx "slow 3.0" <<<"$limits" || grep -qx "slow 3" <<<"$limits" || fail "scaled limits: $limits"
grep -qx "passes 4500.0" <<<"$limits" || grep -qx "passes 4500" <<<"$limits" || fail "default limit not scaled: $limits"
MAGI_TEST_TIMEOUT_SCALE=9 "$cmake" -S "$work/src" -B "$work/b4" -DMAGI_TEST_TIMEOUT_SCALE=0.5 >/dev/null 2>&1 || fail "configure with -D 0.5"
(cd "$work/b4" && "$ctest" -R '^slow$' >/dev/null 2>&1) && fail "the slow test passed under a 0.5 s limit"
if MAGI_TEST_TIMEOUT_SCALE=fast "$cmake" -S "$work/src" -B "$work/b5" >"$work/cfg5.log" 2>&1; then fail "MAGI_TEST_TIMEOUT_SCALE=fast configured"; fi
grep -q "give a positive number" "$work/cfg5.log" || fail "no reason for a bad scale: $(tail -n 5 "$work/cfg5.log")"

# test.sh runs on after a failed stage: no `set -e`, every stage through stages.sh.
grep -nE '^\s*set -[a-z]*e' "$root/scripts/test.sh" && fail "scripts/test.sh stops at the first failure (set -e)"
grep -q 'source scripts/stages.sh' "$root/scripts/test.sh" || fail "scripts/test.sh does not use scripts/stages.sh"
[ "$(grep -v '^\s*#' "$root/scripts/test.sh" | grep -v '^\s*$' | tail -n 1)" = "stages_verdict" ] ||
  fail "scripts/test.sh does not end with stages_verdict"
echo "verdict after a failed stage: $last"
