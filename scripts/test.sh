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
# Every stage runs even when an earlier one failed; the last line printed is
# always the verdict (scripts/stages.sh): each stage's tests passed, failed
# (named) and skipped (named, with why), and the exit status is non-zero
# when any stage failed. MAGI_TEST_TIMEOUT_SCALE=N multiplies every test's
# time limit by N (e.g. 3 on a slow or busy machine; docs/TESTS.md).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/stages.sh
trap 'printf "\n==== FAILED: interrupted; stages so far: %s\n" "${_stages_summary:-none}"' INT TERM

stage_begin "stage 0: system packages and the pinned PyTorch venv"
if ! { bash scripts/deps.sh --test && bash scripts/deps.sh --fuzz; }; then
  stage_fail "stage 0" "scripts/deps.sh could not install the system packages"
fi
jobs=$(nproc)
if pyexe=$(bash scripts/pyenv.sh | tail -n 1) && [ -n "$pyexe" ]; then
  export MAGI_REQUIRE_TORCH=1
else
  stage_fail "stage 0 (python venv)" "scripts/pyenv.sh failed; the Python tests use python3"
  pyexe=$(command -v python3)
fi
scale=()
if [ -n "${MAGI_TEST_TIMEOUT_SCALE:-}" ]; then
  scale=(-DMAGI_TEST_TIMEOUT_SCALE="$MAGI_TEST_TIMEOUT_SCALE")
  echo "test time limits scaled by MAGI_TEST_TIMEOUT_SCALE=$MAGI_TEST_TIMEOUT_SCALE"
fi

stage_begin "stage 1: RelWithDebInfo build (-Werror) and every CTest test"
# MAGI_PYTHON_EXT=ON: the Python document extension must build here (the
# headers come with python3-dev), so its tests run rather than skip.
if cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGI_WERROR=ON \
     -DMAGI_PYTHON_EXT=ON -DPython3_EXECUTABLE="$pyexe" "${scale[@]}" >/dev/null &&
   cmake --build build-ci -j"$jobs"; then
  stage_ctest "stage 1" build-ci --output-on-failure -j"$jobs"
else
  stage_fail "stage 1" "the build failed (its errors are above); no test ran"
fi

if [ "${MAGI_SKIP_SANITIZE:-0}" != 1 ]; then
  stage_begin "stage 2: AddressSanitizer + UndefinedBehaviorSanitizer build"
  echo "Runs every test except those labelled nosan, which stage 1 already ran:"
  echo "the Python tests (an ASan-instrumented libmagi_aot cannot be loaded into"
  echo "a plain python3) and the install test (it builds consumers outside the"
  echo "sanitizer's reach). The fuzz corpora are replayed here (label fuzz-regress)."
  if cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMAGI_SANITIZE=ON -DMAGI_WERROR=ON "${scale[@]}" >/dev/null &&
     cmake --build build-asan -j"$jobs"; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      stage_ctest "stage 2" build-asan --output-on-failure -j"$jobs" -LE "nosan"
  else
    stage_fail "stage 2" "the sanitizer build failed (its errors are above); no test ran"
  fi
else
  stage_skip "stage 2 (sanitizers)" "MAGI_SKIP_SANITIZE=1"
fi

if [ "${MAGI_SKIP_FUZZ:-0}" != 1 ]; then
  stage_begin "stage 3: every libFuzzer target, ${MAGI_FUZZ_SECONDS:-12} s each (clang)"
  stage_run "stage 3 (libFuzzer targets)" bash scripts/fuzz_ci.sh
else
  stage_skip "stage 3 (libFuzzer)" "MAGI_SKIP_FUZZ=1"
fi

if [ "${MAGI_MEMCHECK:-0}" = 1 ]; then
  stage_begin "stage 4: valgrind memcheck of the unit tests"
  stage_run "stage 4 (memcheck)" bash scripts/memcheck.sh
fi
trap - INT TERM
stages_verdict
