#!/usr/bin/env bash
# Dry run of bench_multigpu on a machine with no GPU: the real program and
# the real library (cuda backend, NCCL rendezvous engine) linked against
# fake_cuda.c, a host-only stand-in for libcudart/libnccl/libcublas (target
# bench_multigpu_fake; see fake_cuda.c's header). Timings are meaningless;
# what passes here is the harness: launch, NCCL id hand-off, rendezvous,
# identical collective sequences on every rank, the bit-for-bit check (and
# that it fails when a peer copy is corrupted), the exit-77 path, the report
# and the CSV. The ctest tests bench_multigpu_dryrun* run the same.
#   bash bench/multigpu/fake/dryrun.sh [RANKS] [bench_multigpu options]
# (default 2 ranks at small sizes; needs the CUDA toolkit headers and nccl.h,
# no driver). Build directory: $MAGI_DRYRUN_BUILD (default /tmp/magi-multigpu-dryrun).
# NCCL or cuBLAS outside the toolkit (pip wheels): name them in
# $MAGI_DRYRUN_CMAKE_ARGS, e.g. (docs/PERFORMANCE.md, "Checking the harness
# without a GPU"):
#   N=/path/to/site-packages/nvidia
#   MAGI_DRYRUN_CMAKE_ARGS="-DNCCL_INCLUDE_DIR=$N/nccl/include -DNCCL_LIBRARY=$N/nccl/lib/libnccl.so.2 -DCUBLAS_ROOT=$N/cu13"
set -uo pipefail
cd "$(dirname "$0")/../../.."
RANKS=${1:-2}
shift || true
B=${MAGI_DRYRUN_BUILD:-/tmp/magi-multigpu-dryrun}
OUTD=${OUT:-$B/out}
mkdir -p "$B" "$OUTD"
read -r -a extra <<<"${MAGI_DRYRUN_CMAKE_ARGS:-}"
if ! { cmake -S . -B "$B" -DMAGI_WITH_CUDA=ON -DBUILD_TESTING=OFF "${extra[@]}" >"$B/build.log" 2>&1 &&
       cmake --build "$B" -j2 --target bench_multigpu_fake >>"$B/build.log" 2>&1; }; then
  grep -E "error|bench_multigpu|NCCL" "$B/build.log" | head -20
  echo "dryrun: build failed (needs the CUDA toolkit headers and nccl.h)"; exit 3
fi
BIN=$B/bench/multigpu/bench_multigpu_fake
small=(--max-shard-mib 4 --gemm-n 512 --gemm-shard-mib 4 --hidden 1024 --layers 4 --tokens 64,128 --steps 2 --reps 2)
[ $# -gt 0 ] && small=("$@")
fail=0
echo "== dry run, $RANKS ranks (fake devices: timings meaningless)"
MAGI_FAKE_GPUS=$RANKS timeout 600 "$BIN" --out "$OUTD" "${small[@]}" >"$OUTD/dryrun.log" 2>"$OUTD/dryrun.err"
rc=$?
echo "exit $rc (want 0)"; [ $rc -eq 0 ] || { fail=1; tail -20 "$OUTD/dryrun.err"; }
echo "bit-identical rows: $(grep -c '| yes | yes |' "$OUTD/dryrun.log")"
grep -E "^### |^Correctness|Crossover|Recommended" "$OUTD/dryrun.log"
echo "CSV rows: $(( $(wc -l <"$OUTD/multigpu.csv") - 1 )) in $OUTD/multigpu.csv; markdown: $OUTD/multigpu.md"

echo "== corrupted peer copies must be caught"
MAGI_FAKE_GPUS=$RANKS MAGI_FAKE_CORRUPT=1 timeout 600 "$BIN" --out "$OUTD/corrupt" --only correctness "${small[@]}" \
  >"$OUTD/corrupt.log" 2>"$OUTD/corrupt.err"
rc=$?
echo "exit $rc (want 1); $(grep -c '\*\*NO\*\*' "$OUTD/corrupt.log") rows flagged"
{ [ $rc -eq 1 ] && grep -q "MISMATCH" "$OUTD/corrupt.log"; } || fail=1
grep -m2 "chunk of rank" "$OUTD/corrupt.err"

echo "== one GPU: exit 77"
MAGI_FAKE_GPUS=1 "$BIN" >"$OUTD/one.log" 2>&1; rc=$?
echo "exit $rc (want 77): $(cat "$OUTD/one.log")"; [ $rc -eq 77 ] || fail=1
echo "dryrun: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
