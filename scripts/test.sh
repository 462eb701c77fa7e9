#!/usr/bin/env bash
# Build and run the whole test suite (installs what it needs on Debian 12).
#   1. a RelWithDebInfo build, -Werror, all CTest tests;
#   2. an AddressSanitizer+UndefinedBehaviorSanitizer build of the same suite.
# Set MAGI_SKIP_SANITIZE=1 to run only the first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --test
jobs=$(nproc)
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGI_WERROR=ON >/dev/null
cmake --build build-ci -j"$jobs"
ctest --test-dir build-ci --output-on-failure -j"$jobs"
if [ "${MAGI_SKIP_SANITIZE:-0}" != 1 ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMAGI_SANITIZE=ON -DMAGI_WERROR=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "nosan"
fi
