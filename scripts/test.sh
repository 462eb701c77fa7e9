#!/usr/bin/env bash
# Build and run the whole test suite (installs what it needs on Debian 12).
#   0. a virtual environment with the pinned PyTorch CPU build and
#      transformers (scripts/pyenv.sh), so the Python torch tests run;
#   1. a RelWithDebInfo build, -Werror, all CTest tests;
#   2. an AddressSanitizer+UndefinedBehaviorSanitizer build of the same suite
#      (fuzz corpora replayed: label fuzz-regress);
#   3. every libFuzzer target for a bounded time (clang; scripts/fuzz_ci.sh,
#      MAGI_FUZZ_SECONDS per target, default 12);
#   4. with MAGI_MEMCHECK=1, valgrind memcheck of the unit tests
#      (scripts/memcheck.sh).
# Set MAGI_SKIP_SANITIZE=1 to skip the second, MAGI_SKIP_FUZZ=1 the third.
set -euo pipefail
cd "$(dirname "$0")/.."
stage="setup"
started=$(date +%s)
say() { printf '\n==== %s\n' "$*"; }
trap 'rc=$?; [ $rc -ne 0 ] && printf "\n==== FAILED in %s (exit %d)\n" "$stage" "$rc"' EXIT

stage="dependencies"; say "stage 0: system packages and the pinned PyTorch venv"
bash scripts/deps.sh --test
bash scripts/deps.sh --fuzz
jobs=$(nproc)
pyexe=$(bash scripts/pyenv.sh | tail -n 1)
export MAGI_REQUIRE_TORCH=1

stage="release build"; say "stage 1: RelWithDebInfo build (-Werror) and every CTest test"
# MAGI_PYTHON_EXT=ON: the Python document extension must build here (the
# headers come with python3-dev), so its tests run rather than skip.
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGI_WERROR=ON \
  -DMAGI_PYTHON_EXT=ON -DPython3_EXECUTABLE="$pyexe" >/dev/null
cmake --build build-ci -j"$jobs"
ctest --test-dir build-ci --output-on-failure -j"$jobs" --output-junit ctest-junit.xml
summary="stage 1: $(python3 scripts/ctest_verdict.py build-ci/ctest-junit.xml)"

if [ "${MAGI_SKIP_SANITIZE:-0}" != 1 ]; then
  stage="sanitizer build"; say "stage 2: AddressSanitizer + UndefinedBehaviorSanitizer build"
  echo "Runs every test except those labelled nosan, which stage 1 already ran:"
  echo "the Python tests (an ASan-instrumented libmagi_aot cannot be loaded into"
  echo "a plain python3) and the install test (it builds consumers outside the"
  echo "sanitizer's reach). The fuzz corpora are replayed here (label fuzz-regress)."
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMAGI_SANITIZE=ON -DMAGI_WERROR=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "nosan" --output-junit ctest-junit.xml
  summary="$summary; stage 2: $(python3 scripts/ctest_verdict.py build-asan/ctest-junit.xml)"
else
  summary="$summary; stage 2 (sanitizers) skipped: MAGI_SKIP_SANITIZE=1"
fi

if [ "${MAGI_SKIP_FUZZ:-0}" != 1 ]; then
  stage="fuzzing"; say "stage 3: every libFuzzer target, ${MAGI_FUZZ_SECONDS:-12} s each (clang)"
  bash scripts/fuzz_ci.sh
  summary="$summary; stage 3: libFuzzer targets clean"
else
  summary="$summary; stage 3 (libFuzzer) skipped: MAGI_SKIP_FUZZ=1"
fi

if [ "${MAGI_MEMCHECK:-0}" = 1 ]; then
  stage="memcheck"; say "stage 4: valgrind memcheck of the unit tests"
  bash scripts/memcheck.sh
  summary="$summary; stage 4: memcheck clean"
fi
stage="done"
say "ALL PASSED in $(( $(date +%s) - started )) s: $summary"
