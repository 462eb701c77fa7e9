#!/usr/bin/env bash
# Multi-GPU benchmark in one command, on a machine with 2, 4 or 8
# GPUs of one host (docs/PERFORMANCE.md, "Multi-GPU"):
#   bash bench/multigpu/run.sh [bench_multigpu options...]
# e.g. on the device machine:  run: bash bench/multigpu/run.sh
# Prints the GPUs, `nvidia-smi topo -m` and every GPU's
# cudaDevAttrAsyncEngineCount, builds bench_multigpu (CUDA + NCCL + cuBLAS),
# and runs it: one process per GPU, results as markdown on stdout and in
# $OUT/multigpu.md, CSV in $OUT/multigpu.csv, logs in $OUT.
# Exit: the benchmark's (0 ok, 1 failure or mismatch, 77 fewer than 2 GPUs),
# or 3 when the build fails.
#
# Missing msgpack/jansson development packages: put their .deb files in
# .debs/ (as for bench/gpu_cuda.sh and python/tests/gpu/run.sh); .debs/fallback/
# holds zstd, OpenSSL and pkgconf, unpacked only when missing. NCCL: the
# toolkit's, else (or with MAGI_MULTIGPU_PIP_NCCL=1) the nvidia-nccl pip
# package's. MAGI_MULTIGPU_BUILD: build directory (default ./build-multigpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/magi-multigpu-out}
mkdir -p "$OUT"
BUILD=${MAGI_MULTIGPU_BUILD:-$PWD/build-multigpu}
# Never NVLink multicast on these machines (KINDS.md): also exported to
# every rank; bench_multigpu forces the same values itself.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
t_start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t_start ))s] $*"; }

echo "== GPUs ($(date -u +%FT%TZ), $(uname -r))"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
  echo "== nvidia-smi topo -m"
  nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt"
  nvidia-smi nvlink --status >"$OUT/nvlink.txt" 2>&1 &&
    echo "(per-link NVLink status: $OUT/nvlink.txt, $(grep -c 'Link [0-9]*:' "$OUT/nvlink.txt") links)"
else
  echo "nvidia-smi: not found (no NVIDIA driver on this machine)"
fi

# ---- dependencies carried as .deb files (only what the machine lacks)
PFX=/tmp/pfx-multigpu
LIBD=$PFX/usr/lib/x86_64-linux-gnu
extra=()
if [ -d .debs ] && { [ -n "${MAGI_FORCE_DEBS:-}" ] || ! pkg-config --exists msgpack jansson 2>/dev/null; }; then
  has_hdr() { echo "#include <$1>" | cc -E -x c - >/dev/null 2>&1; }
  for f in .debs/*.deb; do dpkg -x "$f" "$PFX"; done
  if ! has_hdr zstd.h; then for f in .debs/fallback/libzstd*.deb; do dpkg -x "$f" "$PFX"; done; fi
  if ! has_hdr openssl/sha.h; then
    for f in .debs/fallback/libssl*.deb; do dpkg -x "$f" "$PFX"; done
    extra+=("-DOPENSSL_ROOT_DIR=$PFX/usr")
    export CFLAGS="-I$PFX/usr/include/x86_64-linux-gnu ${CFLAGS:-}"
  fi
  if ! command -v pkg-config >/dev/null; then
    for f in .debs/fallback/*pkgconf*.deb; do dpkg -x "$f" "$PFX"; done
    extra+=("-DPKG_CONFIG_EXECUTABLE=$PFX/usr/bin/pkgconf")
  fi
  for pc in "$LIBD"/pkgconfig/*.pc "$PFX"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i -e "s|^prefix=/usr\$|prefix=$PFX/usr|" \
      -e 's|^libdir=${exec_prefix}/lib$|libdir=${exec_prefix}/lib/x86_64-linux-gnu|' "$pc"
  done
  export PKG_CONFIG_PATH=$LIBD/pkgconfig:$PFX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$LIBD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  extra+=("-DCMAKE_PREFIX_PATH=$PFX/usr" "-DCMAKE_BUILD_RPATH=$LIBD")
  stamp "msgpack/jansson from .debs ($PFX)"
fi

# ---- configure + build bench_multigpu
configure() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMAGI_WITH_CUDA=ON -DBUILD_TESTING=OFF \
    "${extra[@]}" "$@" >"$OUT/build.log" 2>&1
}
stamp "configure"
if ! configure; then tail -30 "$OUT/build.log"; stamp "CONFIGURE FAILED"; exit 3; fi
if [ -n "${MAGI_MULTIGPU_PIP_NCCL:-}" ] || ! grep -q "NCCL ON" "$OUT/build.log"; then
  # The toolkit has no NCCL: take the pip package's (header + libnccl.so.2).
  ndir=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2>/dev/null)
  hdr=$( [ -n "$ndir" ] && find $ndir -name nccl.h -path '*include*' 2>/dev/null | head -1)
  lib=$( [ -n "$ndir" ] && find $ndir -name 'libnccl.so*' 2>/dev/null | head -1)
  if [ -z "$hdr" ] || [ -z "$lib" ]; then
    stamp "NCCL not found (toolkit or pip nvidia-nccl): cannot build bench_multigpu"; exit 3
  fi
  stamp "NCCL from pip: $hdr, $lib"
  export LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! configure -DNCCL_INCLUDE_DIR="$(dirname "$hdr")" -DNCCL_LIBRARY="$lib"; then
    tail -30 "$OUT/build.log"; stamp "CONFIGURE FAILED"; exit 3
  fi
fi
grep "magi-aot:" "$OUT/build.log"
if ! cmake --build "$BUILD" -j"$(nproc)" --target bench_multigpu >>"$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -30; stamp "BUILD FAILED"; exit 3
fi
BIN=$BUILD/bench/multigpu/bench_multigpu
if [ ! -x "$BIN" ]; then
  grep "bench_multigpu" "$OUT/build.log"; stamp "bench_multigpu not built (CUDA/NCCL/cuBLAS missing?)"; exit 3
fi
stamp "built $BIN"

# ---- devices: cudaDevAttrAsyncEngineCount and P2P, then the benchmark
echo "== devices (bench_multigpu --info)"
"$BIN" --info 2>&1 | tee "$OUT/info.md"
# The device machine allows 600 s a command: the ranks get what is left of
# MAGI_MULTIGPU_BUDGET_S (default 590) after the build (an explicit
# --timeout-s in the arguments wins).
left=$(( ${MAGI_MULTIGPU_BUDGET_S:-590} - ($(date +%s) - t_start) - 15 ))
[ "$left" -lt 60 ] && left=60
stamp "benchmark: $BIN --out $OUT --timeout-s $left $*"
timeout -k 10 $(( left + 20 )) "$BIN" --out "$OUT" --timeout-s "$left" "$@" \
  2> >(tee "$OUT/bench.stderr" >&2) | tee "$OUT/bench.log"
rc=${PIPESTATUS[0]}
case $rc in
  0) stamp "done: tables in $OUT/multigpu.md, CSV in $OUT/multigpu.csv" ;;
  77) stamp "skipped: fewer than 2 GPUs visible (exit 77); nothing measured" ;;
  *) stamp "FAILED (exit $rc): see $OUT/bench.stderr" ;;
esac
exit "$rc"
