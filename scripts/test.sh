#!/usr/bin/env bash
# Build and run the whole test suite (installs what it needs on Debian 12).
#   0. a virtual environment with the pinned PyTorch CPU build and
#      transformers (scripts/pyenv.sh), so the Python torch tests run;
#   1. a RelWithDebInfo build, -Werror, all CTest tests;
#   2. an AddressSanitizer+UndefinedBehaviorSanitizer build of the same suite
#      (fuzz corpora replayed: label fuzz-regress);
#   3. with MAGI_MEMCHECK=1, valgrind memcheck of the unit tests
#      (scripts/memcheck.sh).
# Set MAGI_SKIP_SANITIZE=1 to skip the second.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --test
jobs=$(nproc)
pyexe=$(bash scripts/pyenv.sh | tail -n 1)
export MAGI_REQUIRE_TORCH=1
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGI_WERROR=ON \
  -DPython3_EXECUTABLE="$pyexe" >/dev/null
cmake --build build-ci -j"$jobs"
ctest --test-dir build-ci --output-on-failure -j"$jobs"
if [ "${MAGI_SKIP_SANITIZE:-0}" != 1 ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMAGI_SANITIZE=ON -DMAGI_WERROR=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "nosan"
fi
if [ "${MAGI_MEMCHECK:-0}" = 1 ]; then
  bash scripts/memcheck.sh
fi
