#!/usr/bin/env bash
# Run every libFuzzer target for a bounded time (clang from Debian's
# packages: scripts/deps.sh --fuzz). Each target starts from a copy of its
# committed corpus, with its dictionary and input-length cap; any finding
# (a crash, a sanitizer report, a leak, an out-of-memory) fails the run and
# leaves the input under build-fuzz/findings/<target>/.
#   bash scripts/fuzz_ci.sh [SECONDS_PER_TARGET]   (default 12; MAGI_FUZZ_SECONDS)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${MAGI_FUZZ_SECONDS:-12}}
build=${MAGI_FUZZ_BUILD:-build-fuzz}
jobs=$(nproc)
CC=clang cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DMAGI_FUZZ=ON -DBUILD_TESTING=OFF \
  -DMAGI_PYTHON_EXT=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(json expr artifact legacy_v0 roundtrip struct loader)
cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}" >/dev/null
declare -A maxlen=([json]=65536 [expr]=8192 [artifact]=16384 [legacy_v0]=16384 [roundtrip]=65536 [struct]=65536 [loader]=65536)
declare -A dict=([json]=json [legacy_v0]=json [roundtrip]=json [expr]=expr [loader]=json)
export ASAN_OPTIONS=quarantine_size_mb=16:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for t in "${targets[@]}"; do
  work="$build/fuzz-run/$t" findings="$build/findings/$t"
  rm -rf "$work" "$findings"
  mkdir -p "$work" "$findings"
  cp -r fuzz/corpus/"$t"/. "$work"/
  args=(-max_total_time="$secs" -rss_limit_mb=1024 -max_len="${maxlen[$t]}" -timeout=20
        -artifact_prefix="$findings/" -print_final_stats=1)
  [ -n "${dict[$t]:-}" ] && args+=(-dict=fuzz/dict/"${dict[$t]}".dict)
  log="$build/fuzz-run/$t.log"
  if "$build/fuzz/fuzz_$t" "${args[@]}" "$work" >"$log" 2>&1; then
    printf 'fuzz %-10s ok   %s\n' "$t" "$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2 " runs"}')"
  else
    printf 'fuzz %-10s FOUND something (log %s, inputs in %s):\n' "$t" "$log" "$findings"
    grep -E 'ERROR|SUMMARY|runtime error|FUZZ_ASSERT|abort' "$log" | head -5 || true
    failed+=("$t")
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: findings in ${failed[*]}"; exit 1; }
