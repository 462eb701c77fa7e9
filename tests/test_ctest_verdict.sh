#!/usr/bin/env bash
# The test verdict of scripts/test.sh (scripts/ctest_verdict.py) on a real
# CTest run: a test that exits 77 is counted as skipped, never as passed,
# and the verdict names it with the reason it printed ("skipped: ...").
set -euo pipefail
# usage: test_ctest_verdict.sh [PYTHON [CTEST]]
py=${1:-python3} ctest=${2:-ctest}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/CTestTestfile.cmake" <<'CT'
add_test(passes "/bin/sh" "-c" "echo fine")
add_test(needs_gpu "/bin/sh" "-c" "echo probing; echo 'skipped: no CUDA device'; exit 77")
set_tests_properties(needs_gpu PROPERTIES SKIP_RETURN_CODE 77)
add_test(says_nothing "/bin/sh" "-c" "exit 77")
set_tests_properties(says_nothing PROPERTIES SKIP_RETURN_CODE 77)
add_test(passes_too "/bin/sh" "-c" "echo 'skipped: a line of a test that passed'")
CT
(cd "$work" && "$ctest" --output-junit junit.xml >ctest.out 2>&1)
got=$("$py" "$root/scripts/ctest_verdict.py" "$work/junit.xml")
want="2 passed, 2 skipped (needs_gpu: no CUDA device; says_nothing: no reason printed)"
if [ "$got" != "$want" ]; then
  printf 'verdict:  %s\nexpected: %s\n' "$got" "$want"
  exit 1
fi
# test.sh builds its stage lines from this script (through scripts/stages.sh),
# not from `ctest -N`.
grep -q 'ctest_verdict.py' "$root/scripts/stages.sh" || { echo "scripts/stages.sh does not use ctest_verdict.py"; exit 1; }
if grep -n 'Total Tests' "$root/scripts/test.sh" "$root/scripts/stages.sh"; then echo "scripts/test.sh still counts every test as passed"; exit 1; fi
echo "verdict: $got"
