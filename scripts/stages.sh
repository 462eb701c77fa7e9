# The stage bookkeeping of scripts/test.sh, sourced by it (and by
# tests/test_stages.sh, which runs it on a small CTest project): every
# stage runs even after an earlier one failed, each stage's result joins
# one verdict line, and that line is always the last thing printed.
#
#   stage_begin "stage 1: what it does"   prints where a stage starts
#   stage_run NAME CMD...                  runs CMD; NAME: "clean" or "failed (exit N)"
#   stage_ctest NAME BUILD CTEST_ARGS...   ctest --test-dir BUILD with a JUnit file;
#                                          NAME: scripts/ctest_verdict.py's line
#   stage_skip NAME REASON                 NAME: "skipped: REASON"
#   stage_fail NAME WHY                    NAME: "failed: WHY" (a step that could not run)
#   stages_verdict                         prints the verdict; status 1 if any stage failed
#
# CTEST (default ctest) and PYTHON (default python3) name the programs.
# Nothing here exits the calling shell; it must not run under `set -e`
# for the stage commands' failures to be recorded rather than fatal.
_stages_summary=""
_stages_failed=""
_stages_started=$(date +%s)
_stages_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

stage_begin() { printf '\n==== %s\n' "$*"; }

_stage_note() { # NAME TEXT FAILED(0|1)
  _stages_summary="${_stages_summary:+$_stages_summary; }$1: $2"
  if [ "$3" = 1 ]; then _stages_failed="${_stages_failed:+$_stages_failed, }$1"; fi
}

stage_run() {
  local name=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" = 0 ]; then _stage_note "$name" clean 0; else _stage_note "$name" "failed (exit $rc)" 1; fi
  return 0
}

stage_skip() { _stage_note "$1" "skipped: $2" 0; }
stage_fail() { _stage_note "$1" "failed: $2" 1; }

stage_ctest() {
  local name=$1 build=$2 rc=0 line vrc=0
  shift 2
  rm -f "$build/ctest-junit.xml"
  "${CTEST:-ctest}" --test-dir "$build" --output-junit ctest-junit.xml "$@" || rc=$?
  line=$("${PYTHON:-python3}" "$_stages_root/scripts/ctest_verdict.py" "$build/ctest-junit.xml") || vrc=$?
  if [ "$vrc" != 0 ] || [ -z "$line" ]; then
    _stage_note "$name" "ctest exit $rc, no test results read" 1
  elif [ "$rc" != 0 ] || [[ "$line" == *" failed ("* ]]; then
    _stage_note "$name" "$line" 1
  else
    _stage_note "$name" "$line" 0
  fi
  return 0
}

stages_verdict() {
  local took=$(( $(date +%s) - _stages_started ))
  if [ -n "$_stages_failed" ]; then
    printf '\n==== FAILED (%s) in %d s: %s\n' "$_stages_failed" "$took" "$_stages_summary"
    return 1
  fi
  printf '\n==== ALL PASSED in %d s: %s\n' "$took" "$_stages_summary"
  return 0
}
