#!/usr/bin/env bash
# Valgrind memcheck over the unit tests (CTest label `unit`, or the labels in
# MAGI_MEMCHECK_LABEL, a ctest -L regex) through `ctest -T memcheck`.
# A test fails when valgrind reports an error or a definite/indirect leak
# (--error-exitcode); the CTest memcheck summary lists the defects.
#   scripts/memcheck.sh            # build-memcheck/, label unit
#   MAGI_MEMCHECK_LABEL='unit|fuzz-regress' scripts/memcheck.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "memcheck: valgrind not installed" >&2; exit 1; }
build=${MAGI_MEMCHECK_BUILD:-build-memcheck}
jobs=${MAGI_JOBS:-$(nproc)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DMAGI_SANITIZE=OFF -DMAGI_WITH_CUDA=OFF \
  -DMEMORYCHECK_COMMAND="$(command -v valgrind)" \
  "-DMEMORYCHECK_COMMAND_OPTIONS=--error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --num-callers=30" \
  >/dev/null
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" -T memcheck -L "${MAGI_MEMCHECK_LABEL:-unit}" -j"$jobs" --output-on-failure
