#!/bin/bash
# Build, every GPU check and every benchmark of the cuda SymmBuffer backend,
# in one go, on a machine with a GPU (docs/CUDA.md). Run from the repo root:
#   bash bench/gpu_cuda.sh [OUTDIR]
# Logs go to OUTDIR (default $OUT, else /tmp/magi-gpu); the last lines
# printed are the summary and the benchmark tables.
# If the machine lacks the msgpack/jansson development packages, put their
# .deb files in .debs/ (apt-get download libmsgpack-dev libmsgpackc2
# libjansson-dev libjansson4 ...): they are unpacked under /tmp/pfx.
set -u
OUTDIR=${1:-${OUT:-/tmp/magi-gpu}}
mkdir -p "$OUTDIR"
ROOT=$(pwd)
BUILD=${MAGI_GPU_BUILD:-/tmp/magi-gpu-build}
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
# The whole run stays within MAGI_GPU_BUDGET seconds (default 470): each
# step's timeout is capped by what is left, and a step with under 20 s left
# is skipped (said in the summary). MAGI_GPU_SKIP: space-separated steps to
# leave out (tests load bench mixed gemm profile).
START=$(date +%s)
BUDGET=${MAGI_GPU_BUDGET:-470}
SKIP=" ${MAGI_GPU_SKIP:-} "
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
# tmo WANT: the timeout for a step that wants WANT seconds, 0 when skipped
tmo() { local l; l=$(left); [ "$l" -lt 20 ] && { echo 0; return; }; [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }
want() { # want STEP SECONDS: prints the timeout, or notes the skip and prints 0
    local t; t=$(tmo "$2")
    if [[ "$SKIP" == *" $1 "* ]]; then note "$1: skipped (MAGI_GPU_SKIP)" >&2; echo 0; return; fi
    [ "$t" -eq 0 ] && note "$1: skipped (time budget of ${BUDGET} s spent)" >&2
    echo "$t"
}

EXTRA=()
if [ -d .debs ] && { [ -n "${MAGI_FORCE_DEBS:-}" ] || ! pkg-config --exists msgpack jansson 2>/dev/null; }; then
    PFX=/tmp/pfx
    for f in .debs/*.deb; do dpkg -x "$f" "$PFX"; done
    if [ ! -f /usr/include/zstd.h ] || [ ! -d /usr/include/openssl ]; then
        for f in .debs/fallback/*.deb; do [ -f "$f" ] && dpkg -x "$f" "$PFX"; done
    fi
    for pc in "$PFX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$PFX"/usr/share/pkgconfig/*.pc; do
        [ -f "$pc" ] && sed -i -e "s|^prefix=/usr\$|prefix=$PFX/usr|" \
            -e 's|^libdir=${exec_prefix}/lib$|libdir=${exec_prefix}/lib/x86_64-linux-gnu|' "$pc"
    done
    export PKG_CONFIG_PATH="$PFX/usr/lib/x86_64-linux-gnu/pkgconfig:$PFX/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
    export LD_LIBRARY_PATH="$PFX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
    EXTRA+=("-DCMAKE_PREFIX_PATH=$PFX/usr" "-DCMAKE_BUILD_RPATH=$PFX/usr/lib/x86_64-linux-gnu")
    [ -d /usr/include/openssl ] || EXTRA+=("-DOPENSSL_ROOT_DIR=$PFX/usr")
fi

nvidia-smi -L 2>&1 | tee -a "$SUMMARY"
T0=$(date +%s)
if ! timeout 120 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGI_WITH_CUDA=ON "${EXTRA[@]}" \
        >"$OUTDIR/build.log" 2>&1; then
    note "CONFIGURE FAILED"; tail -30 "$OUTDIR/build.log"; exit 1
fi
if ! timeout 240 cmake --build "$BUILD" -j"$(nproc)" --target magi-aot magi_aot test_symm_cuda test_symm_sock test_symm_graph test_symm_bucket \
        bench_symm_cuda bench_symm_mixed \
        >>"$OUTDIR/build.log" 2>&1; then
    note "BUILD FAILED"; grep -E "error|Error" "$OUTDIR/build.log" | head -30; exit 1
fi
# The CUPTI activity library (step gemm) only where CUPTI was found.
timeout 60 cmake --build "$BUILD" -j"$(nproc)" --target cupti_copies >>"$OUTDIR/build.log" 2>&1 ||
    note "cupti_copies: not built (no CUPTI in this toolkit?)"
note "build: $(( $(date +%s) - T0 )) s; $("$BUILD/magi-aot" --version)"

# 1. the GPU tests (4 rank processes on the GPU(s))
T=$(want tests 120)
if [ "$T" -gt 0 ]; then
    T0=$(date +%s)
    timeout "$T" "$BUILD/tests/test_symm_cuda" >"$OUTDIR/test_symm_cuda.log" 2>&1
    note "test_symm_cuda: exit $? in $(( $(date +%s) - T0 )) s ($(tail -1 "$OUTDIR/test_symm_cuda.log"))"
    grep -E "^(ok|FAIL)|rank [0-9]:" "$OUTDIR/test_symm_cuda.log" | tee -a "$SUMMARY"
    timeout 60 "$BUILD/tests/test_symm_sock" >"$OUTDIR/test_symm_sock.log" 2>&1
    note "test_symm_sock: exit $? ($(tail -1 "$OUTDIR/test_symm_sock.log"))"
    timeout 30 "$BUILD/tests/test_symm_graph" >"$OUTDIR/test_symm_graph.log" 2>&1
    note "test_symm_graph: exit $? ($(tail -1 "$OUTDIR/test_symm_graph.log"))"
    timeout 30 "$BUILD/tests/test_symm_bucket" >"$OUTDIR/test_symm_bucket.log" 2>&1
    note "test_symm_bucket: exit $? ($(tail -1 "$OUTDIR/test_symm_bucket.log"))"
fi

# 2. mixed buckets, batch vs graph path, old vs new bucket layout, at 4 and
#    8 ranks on the GPU(s)
for W in 4 8; do
    T=$(want mixed $(( W == 4 ? 120 : 140 )))
    [ "$T" -gt 0 ] || continue
    T0=$(date +%s)
    timeout "$T" "$BUILD/tests/bench_symm_mixed" --world $W >"$OUTDIR/bench_mixed_w$W.log" 2>&1
    note "bench_symm_mixed --world $W: exit $? in $(( $(date +%s) - T0 )) s"
done

# 2b. where the bucket's copies run beside the GEMM: bench_symm_mixed's GEMM
#     section alone at 4 ranks under the CUPTI activity library
#     (bench/cupti_copies.c; one summary per process, the measuring rank's
#     split into one phase per background and window)
T=$(want gemm 120)
if [ "$T" -gt 0 ]; then
    T0=$(date +%s)
    CUPTI_LIB="$BUILD/tests/libcupti_copies.so"
    rm -rf "$OUTDIR/cupti"; mkdir -p "$OUTDIR/cupti"
    if [ -f "$CUPTI_LIB" ]; then
        CUDA_INJECTION64_PATH="$CUPTI_LIB" MAGI_CUPTI_OUT="$OUTDIR/cupti/summary" \
            timeout "$T" "$BUILD/tests/bench_symm_mixed" --world 4 --only gemm >"$OUTDIR/bench_gemm_w4.log" 2>&1
        grc=$?
    else
        note "gemm: no libcupti_copies.so; running without CUPTI"
        timeout "$T" "$BUILD/tests/bench_symm_mixed" --world 4 --only gemm >"$OUTDIR/bench_gemm_w4.log" 2>&1
        grc=$?
    fi
    note "bench_symm_mixed --world 4 --only gemm (CUPTI): exit $grc in $(( $(date +%s) - T0 )) s"
    # the processes with copy or kernel records first (the measuring rank)
    : >"$OUTDIR/cupti_summary.txt"
    for f in $(ls -S "$OUTDIR"/cupti/summary.* 2>/dev/null); do cat "$f" >>"$OUTDIR/cupti_summary.txt"; echo >>"$OUTDIR/cupti_summary.txt"; done
    [ -s "$OUTDIR/cupti_summary.txt" ] || note "gemm: no CUPTI summary written"
fi


# 3. the cost-table profiler (PyTorch on the GPU) and the schedule on it
T=$(want profile 100)
[ -f python/tests/gpu/profile_costs.sh ] || { note "profile: no python/tests/gpu/profile_costs.sh"; T=0; }
if [ "$T" -gt 0 ]; then
    T0=$(date +%s)
    MAGI_AOT_LIB=$(ls "$BUILD"/libmagi_aot.so 2>/dev/null || ls "$BUILD"/libmagi_aot.so.* | head -1) MAGI_CLI="$BUILD/magi-aot" \
        timeout "$T" bash python/tests/gpu/profile_costs.sh "$OUTDIR/profile" >"$OUTDIR/profile.log" 2>&1
    note "profile_costs: exit $? in $(( $(date +%s) - T0 )) s"
fi

# 4. the whole load path: an artifact saved from the fsdp fixture, loaded by
#    4 ranks with --transport copy_engine --backend cuda (binds device
#    windows, runs every rewritten gather once and checks it).
T=$(want load 60)
if [ "$T" -gt 0 ]; then
W=$(mktemp -d /tmp/magi-load-XXXXXX)
"$BUILD/magi-aot" save "$ROOT/fixtures/real/fsdp_block.json" -o "$W/fsdp.magi" >"$OUTDIR/load.log" 2>&1
pids=()
for r in 0 1 2 3; do
    timeout "$T" "$BUILD/magi-aot" load "$W/fsdp.magi" --transport copy_engine --backend cuda --rank $r --world 4 \
        --rendezvous "$W/rdv" --timeout-ms 60000 --check-gathers >"$W/out.$r" 2>&1 &
    pids+=($!)
done
lrc=0
for r in 0 1 2 3; do wait "${pids[$r]}" || lrc=$?; { echo "--- rank $r"; cat "$W/out.$r"; } >>"$OUTDIR/load.log"; done
note "magi-aot load --backend cuda, 4 ranks: exit $lrc"
grep -iE "gather|check|backend|error" "$W/out.0" | head -20 | tee -a "$SUMMARY"
rm -rf "$W"
fi


# 5. the batch path's benchmarks (figures in docs/CUDA.md)
T=$(want bench 120)
if [ "$T" -gt 0 ]; then
    T0=$(date +%s)
    timeout "$T" "$BUILD/tests/bench_symm_cuda" >"$OUTDIR/bench.log" 2>&1
    note "bench_symm_cuda: exit $? in $(( $(date +%s) - T0 )) s"
fi

# tables last
echo; echo "==================== tables"
for f in bench.log bench_mixed_w4.log bench_mixed_w8.log bench_gemm_w4.log cupti_summary.txt profile/summary.txt; do
    [ -f "$OUTDIR/$f" ] && { echo "---- $f"; cat "$OUTDIR/$f"; }
done
echo; echo "==================== summary (total $(( $(date +%s) - START )) s)"
cat "$SUMMARY"
