#!/usr/bin/env bash
# One device call on the H200 machine (PyTorch 2.11, CUDA 13, no msgpack or
# jansson): build libmagi_aot from the working tree, run the Python tests
# (binding + torch), then the save/load round trip and the benchmark.
#   bash python/tests/gpu/run.sh [all|unittest|warmprocs|roundtrip|zoo|runtime|exposed|warmstart|warmmodels|warmchecks|opshost|titan|overlap|layouts|code|build|none]
# (build: the library with the cuda backend and the extensions, nothing run)
# (unittest: the Python suite but test_warm.WarmStartProcesses, which runs
# alone as warmprocs: its fresh processes take ~400 s on one H200 machine)
# (zoo: the model-zoo table of gpu/zoo.py into $OUT/zoo, docs/ZOO.md)
# (runtime: the library with the cuda backend, then examples/fsdp_e2e.py on
# the GPU(s): 4 ranks - sharing the device on one GPU, gloo for the gathers
# kept on c10d; NCCL with one GPU per rank - eager bit-exact, Inductor
# within bf16 tolerance, opcheck of both operators, the plan-mismatch
# check, alias binding, and the benchmark: symm host time, step time; then
# the exposed step)
# (exposed: the cost profiler on fixtures/real/fsdp_block.json, then
# python/tests/gpu/exposed.py: each gather's predicted stall vs the time the
# compute stream measurably waits for it, join="wait" vs join="call"; then the
# forward without instrumentation - eager, Inductor's Python and C++ wrappers,
# a CUDA graph - host time to queue against device time, with the host split)
# (opshost: the symm operator's host time per call of the 20-input bucket,
# bench/bench_symm_ops.py --device cuda: C++ and Python kernels on 4 ranks
# sharing the GPU, call alone / + the one wait a loaded graph holds / + 20
# waits, beside torch's NCCL coalesced gather of the same shapes, one table
# into $OUT/opshost.log and $OUT/opshost.json)
# (titan: the library with the cuda backend, then python/tests/titan_e2e.py
# with torchtitan's SimpleFSDP Llama3 on 4 ranks sharing the one GPU: fp32
# vocab 1000 and bf16 vocab 1001 (uneven), saved in rank processes, loaded
# with copy_engine in fresh ones on the cuda backend (gloo for what stays on
# c10d), eager bit-exact against the compiled original and through Inductor
# within tolerance; bf16 also with the cast and pad kept on c10d. Needs
# torchtitan importable: 0.2.2 and the wheels it needs (docs/PYTHON.md,
# "run.sh titan") installed by the device command into a --target dir on
# PYTHONPATH. Results in $OUT/titan; not part of all)
# (warmstart: bench/warmstart.py into $OUT/warmstart - the warm-start benchmark: eager,
# magi warm_start, torch.compile's warm Inductor cache, mega-cache, AOT precompile and
# AOTInductor, every path timed by the same code in fresh processes, 3 runs each, the
# torch anchor's eager/cold/warm beside; not part of all: ~6 minutes)
# (warmmodels: python/tests/warm_models_ci.py with MAGI_WARM_DEVICE=cuda - stock
# Llama, Qwen2, Mixtral and the held-out models warm-started at the defaults in a
# second fresh process on the GPU; ~4 minutes)
# (warmchecks: python/tests/gpu/warmstart.py into $OUT/warmchecks - the warm start's
# checks: simulated other GPU architecture, flipped byte, Mixtral; ~8 minutes)
# (layouts: titan_e2e.py's layouts beyond 1-D on the cuda backend, the cases
# of MAGI_LAYOUT_CASES, LAYOUT:MP[:one], default HSDP fp32 and bf16; MoE
# needs torchtitan 0.3 on PYTHONPATH. Not part of all)
# (code: SymmRuntime.compile on CUDA - titan_e2e.py --runs code,code_again,
# the tiny Llama3 on 4 ranks compiled into a cache directory, then served
# from it by fresh processes. Not part of all)
# Debian packages the machine lacks travel in .debs/ (see docs/PYTHON.md);
# .debs/fallback/ holds zstd/OpenSSL/pkgconf, unpacked only when missing.
# Logs and JSON results go to $OUT (or /tmp/magi-gpu-out).
set -uo pipefail
cd "$(dirname "$0")/../../.."
what=${1:-all}
OUT=${OUT:-/tmp/magi-gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
t_start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t_start ))s] $*"; }

PFX=/tmp/pfx
LIBD=$PFX/usr/lib/x86_64-linux-gnu
extra=()
if [ -d .debs ]; then
  for f in .debs/*.deb; do dpkg -x "$f" "$PFX"; done
  has_hdr() { echo "#include <$1>" | cc -E -x c - >/dev/null 2>&1; }
  if ! has_hdr zstd.h; then
    for f in .debs/fallback/libzstd*.deb; do dpkg -x "$f" "$PFX"; done; stamp "zstd from .debs"
  fi
  if ! has_hdr openssl/sha.h; then
    for f in .debs/fallback/libssl*.deb; do dpkg -x "$f" "$PFX"; done
    export CFLAGS="-I$PFX/usr/include/x86_64-linux-gnu ${CFLAGS:-}"; stamp "openssl from .debs"
  fi
  if ! command -v pkg-config >/dev/null; then
    for f in .debs/fallback/*pkgconf*.deb; do dpkg -x "$f" "$PFX"; done
    export LD_LIBRARY_PATH=$LIBD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    extra+=(-DPKG_CONFIG_EXECUTABLE=$PFX/usr/bin/pkgconf); stamp "pkgconf from .debs"
  fi
  sed -i -e "s|^prefix=/usr\$|prefix=$PFX/usr|" \
         -e 's|^libdir=${exec_prefix}/lib$|libdir=${exec_prefix}/lib/x86_64-linux-gnu|' \
         "$LIBD"/pkgconfig/*.pc
  export PKG_CONFIG_PATH=$LIBD/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
fi
stamp "configure"
cuda=OFF
{ [ "$what" = runtime ] || [ "$what" = exposed ] || [ "$what" = opshost ] || [ "$what" = titan ] || [ "$what" = build ] || [ "$what" = overlap ] || [ "$what" = layouts ] || [ "$what" = code ]; } && cuda=ON
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMAGI_WITH_CUDA=$cuda -DBUILD_TESTING=OFF \
  -DCMAKE_PREFIX_PATH=$PFX/usr -DCMAKE_INSTALL_RPATH=$LIBD -DCMAKE_BUILD_RPATH=$LIBD \
  "${extra[@]}" >"$OUT/build.log" 2>&1 &&
cmake --build build-gpu -j"$(nproc)" --target magi_aot magi-aot >>"$OUT/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; stamp "build failed"; exit 1; fi
stamp "built"
# the torch operator extension (C++ kernels of magi::symm_all_gather*), where
# this python's torch is found (else the package's Python kernels serve)
if grep -q "torch operator extension ON" "$OUT/build.log"; then
  cmake --build build-gpu -j"$(nproc)" --target magi_torch_ops >>"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; stamp "torch operator extension build failed"; exit 1; }
  stamp "torch operator extension built"
fi
# the Python document extension, where this python's headers are found
# (else docio.py falls back to marshal; the build log says which)
if grep -q "Python document extension ON" "$OUT/build.log"; then
  cmake --build build-gpu -j"$(nproc)" --target magi_docbuild >>"$OUT/build.log" 2>&1 ||
    { tail -20 "$OUT/build.log"; stamp "document extension build failed"; exit 1; }
fi
export MAGI_AOT_LIB=$PWD/build-gpu/libmagi_aot.so MAGI_CLI=$PWD/build-gpu/magi-aot

fail=0
# the package installs with pip (no network there: no build isolation)
rm -rf /tmp/magi-pyinst
if python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/magi-pyinst ./python \
     >"$OUT/pip.log" 2>&1 &&
   (cd /tmp && PYTHONPATH=/tmp/magi-pyinst python3 -c "import magi_aot, sys; print('installed', magi_aot.__file__, magi_aot.fingerprint(sys.argv[1])[:16])" "$OLDPWD/fixtures/real/block.json"); then
  stamp "pip install ./python: ok"
else
  tail -20 "$OUT/pip.log"; stamp "pip install ./python: FAILED"; fail=1
fi
rm -rf python/build python/*.egg-info
if [ "$what" = all ] || [ "$what" = roundtrip ]; then
  RT=/tmp/magi-rt; rm -rf "$RT"
  stamp "roundtrip save"
  timeout 150 python3 python/tests/gpu/roundtrip.py save "$RT" 2>&1 | tee "$OUT/save.log" | grep -v Warning
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
  stamp "roundtrip load (another process)"
  timeout 120 python3 python/tests/gpu/roundtrip.py load "$RT" 2>&1 | tee "$OUT/load.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
  cp "$RT"/expect.json "$RT"/results.json "$OUT"/ 2>/dev/null
fi
if [ "$what" = all ] || [ "$what" = unittest ]; then
  stamp "unittest"
  # every test but the fresh-process warm starts (each process imports
  # torch with CUDA: ~400 s together there), which run as "warmprocs"
  timeout 420 python3 - <<'PY' 2>&1 | tee "$OUT/unittest.log" | tail -60
import sys, unittest
def flat(s):
    for t in s:
        yield from (flat(t) if isinstance(t, unittest.TestSuite) else [t])
tests = [t for t in flat(unittest.defaultTestLoader.discover("python/tests")) if ".WarmStartProcesses." not in t.id()]
sys.exit(not unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(tests)).wasSuccessful())
PY
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = warmprocs ]; then
  stamp "unittest: the fresh-process warm starts"
  (cd python/tests && timeout 540 python3 -m unittest -v test_warm.WarmStartProcesses) 2>&1 | tee "$OUT/warmprocs.log" | tail -20
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = warmstart ]; then
  stamp "warm start benchmark: every path by the same clock, fresh processes"
  timeout 540 python3 bench/warmstart.py --out "$OUT/warmstart" --runs 3 --device cuda \
    --anchor-modes eager,cold,warm --budget 400 --timeout 150 2>&1 | tee "$OUT/warmstart.log" | grep -v '^{' | tail -40
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = warmmodels ]; then
  stamp "warm start of the stock models at the defaults, two fresh processes on the GPU"
  (cd python/tests && MAGI_WARM_DEVICE=cuda timeout 400 python3 -m unittest -v warm_models_ci) 2>&1 \
    | tee "$OUT/warmmodels.log" | grep -Ev "Warning|^\s*$" | tail -60
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = warmchecks ]; then
  stamp "warm start checks: simulated key, flipped byte, Mixtral"
  timeout 560 python3 python/tests/gpu/warmstart.py --out "$OUT/warmchecks" --skip-anchor 2>&1 | tee "$OUT/warmchecks.log" | tail -40
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = zoo ]; then
  stamp "model zoo"
  timeout 480 python3 python/tests/gpu/zoo.py --out "$OUT/zoo" 2>&1 | tee "$OUT/zoo.log" \
    | grep -v -E '^[EWI][0-9]{4} ' | tail -60
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = runtime ]; then
  "$MAGI_CLI" --version
  E2E=/tmp/magi-e2e; rm -rf "$E2E"
  stamp "fsdp_e2e: trace, 4 ranks eager + Inductor + opcheck, mismatch check"
  timeout 420 python3 examples/fsdp_e2e.py all --out "$E2E" --device cuda --world 4 --inductor \
    --mismatch 2>&1 | tee "$OUT/e2e.log" | grep -Ev "Warning|^\s*$" | tail -40
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
  stamp "fsdp_e2e: alias binding + benchmark"
  timeout 240 python3 examples/fsdp_e2e.py launch --out "$E2E" --device cuda --world 4 --mode alias \
    --bench 50 2>&1 | tee "$OUT/e2e_bench.log" | grep -Ev "Warning|^\s*$" | tail -20
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
  cp "$E2E"/rank?.json "$OUT"/ 2>/dev/null
fi
if [ "$what" = runtime ] || [ "$what" = exposed ]; then
  stamp "exposed time per gather: fsdp_block as a real region, 4 ranks, predicted vs measured"
  PYTHONPATH=$PWD/python timeout 90 python3 -m magi_aot.profile fixtures/real/fsdp_block.json \
    --out "$OUT/fsdp_block.costs.json" --device cuda --iters 20 >"$OUT/profile.log" 2>&1 ||
    { tail -5 "$OUT/profile.log"; fail=1; }
  timeout 400 python3 python/tests/gpu/exposed.py --out "$OUT/exposed" --world 4 --host-split --dump --lengths 0,1024,4096 \
    --costs "$OUT/fsdp_block.costs.json" 2>&1 | tee "$OUT/exposed.log" | grep -Ev "Warning|^\s*$" | tail -28
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = opshost ]; then
  stamp "symm operator host cost: C++ / Python kernels vs NCCL coalesced, 20-input bucket"
  timeout 500 python3 bench/bench_symm_ops.py --device cuda --calls 1000 --json "$OUT/opshost.json" \
    --profile "$OUT/opsprof" 2>&1 \
    | tee "$OUT/opshost.log" | grep -Ev "Warning|^\s*$" | tail -12
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
fi
if [ "$what" = titan ]; then
  TT=/tmp/magi-titan; rm -rf "$TT"; mkdir -p "$OUT/titan"
  if ! python3 -c "import sys; sys.path.insert(0, 'python/tests'); import titan_model as tm, torch; tm.import_torchtitan(); print('torch', torch.__version__, 'torchtitan', tm.titan_version(), 'adapter', tm.release())" 2>&1 | tee "$OUT/titan/versions.log" | tail -3; then
    stamp "titan: torchtitan does not import (install its wheels on PYTHONPATH first)"; fail=1
  else
    stamp "titan: fp32 vocab 1000 and bf16 vocab 1001, 4 ranks on one GPU, side by side"
    timeout 330 python3 python/tests/titan_e2e.py --out "$TT/fp32_v1000_w4" --device cuda --world 4 \
      --vocab 1000 --mp fp32 --inductor --timeout 300 >"$OUT/titan/fp32_v1000_w4.log" 2>&1 &
    p1=$!
    timeout 330 python3 python/tests/titan_e2e.py --out "$TT/bf16_v1001_w4" --device cuda --world 4 \
      --vocab 1001 --mp bf16 --runs bind,keep --inductor --timeout 300 >"$OUT/titan/bf16_v1001_w4.log" 2>&1 &
    p2=$!
    rc1=0; rc2=0
    wait $p1 || rc1=$?
    wait $p2 || rc2=$?
    for c in fp32_v1000_w4:$rc1 bf16_v1001_w4:$rc2; do
      rc=${c#*:}; c=${c%%:*}
      # rank 0's line per phase and the verdict; on a failure the log's tail
      grep -E "^titan_e2e" "$OUT/titan/$c.log" | grep -Ev "^titan_e2e (save|run_[a-z]+) rank [1-9]" | cut -c1-700
      if [ "$rc" -ne 0 ]; then
        fail=1; echo "titan $c: exit $rc"; grep -Ev "Warning|warnings.warn|^\s*$" "$OUT/titan/$c.log" | tail -40
      fi
      mkdir -p "$OUT/titan/$c"
      cp "$TT/$c"/*.json "$TT/$c"/*.log "$OUT/titan/$c/" 2>/dev/null
    done
  fi
fi
if [ "$what" = overlap ]; then
  # Inductor with its defaults compiles the torchtitan Llama3 region twice
  # (scheduled, unscheduled); rank 0 times both, the others keep their
  # windows mapped. The Python operator kernels: the probe times their waits.
  OV=/tmp/magi-overlap; rm -rf "$OV"; mkdir -p "$OUT/overlap"
  for case in ${MAGI_OVERLAP_CASES:-tiny:1000:fp32 llama3-8b-layers:16384:bf16}; do
    IFS=: read -r size vocab mp <<<"$case"
    stamp "overlap: torchtitan Llama3 at size $size, vocab $vocab, $mp, 4 ranks on one GPU"
    MAGI_AOT_OPS=python timeout 560 python3 python/tests/titan_e2e.py --out "$OV/$size" --device cuda --world 4 \
      --vocab "$vocab" --mp "$mp" --size "$size" --runs "${MAGI_OVERLAP_RUNS:-overlap,overlap_measured}" --iters "${MAGI_OVERLAP_ITERS:-10}" \
      --timeout 540 >"$OUT/overlap/$size.log" 2>&1
    rc=$?
    grep -E "^titan_e2e" "$OUT/overlap/$size.log" | grep -Ev "^titan_e2e (save|run_[a-z]+) rank [1-9]" | cut -c1-300
    if [ $rc -ne 0 ]; then fail=1; grep -Ev "Warning|warnings.warn|^\s*$" "$OUT/overlap/$size.log" | tail -30; fi
    mkdir -p "$OUT/overlap/$size"; cp "$OV/$size"/rank0.*.json "$OV/$size"/summary.json "$OV/$size"/*.svg "$OUT/overlap/$size/" 2>/dev/null
    for r in overlap overlap_measured; do
      [ -f "$OV/$size/rank0.run_$r.json" ] || continue
      echo "-- $size, run $r"; python3 python/tests/gpu/overlap_table.py "$OV/$size/rank0.run_$r.json"
    done
  done
fi
if [ "$what" = layouts ]; then
  # the SimpleFSDP layouts beyond 1-D on the cuda backend, 4 ranks sharing
  # the GPU: MAGI_LAYOUT_CASES, each LAYOUT:MP[:one] (one: every rank loads
  # rank 0's region, no groups= given); default HSDP 2 x 2 in fp32 and bf16.
  # The MoE layouts (moe, moe_col) need torchtitan 0.3 on PYTHONPATH; on
  # torch 2.11 titan_model stands in for the one torch name it lacks.
  LY=/tmp/magi-layouts; rm -rf "$LY"; mkdir -p "$OUT/layouts"
  for c in ${MAGI_LAYOUT_CASES:-hsdp:fp32 hsdp:bf16}; do
    IFS=: read -r layout mp one <<<"$c"
    name=${layout}_${mp}${one:+_$one}
    stamp "layouts: $name"
    timeout 400 python3 python/tests/titan_e2e.py --out "$LY/$name" --device cuda --world 4 --layout "$layout" \
      --vocab 1000 --mp "$mp" ${one:+--one-artifact} --timeout 380 >"$OUT/layouts/$name.log" 2>&1
    rc=$?
    grep -E "^titan_e2e" "$OUT/layouts/$name.log" | grep -Ev "^titan_e2e (save|run_[a-z]+) rank [1-9]" | cut -c1-600
    if [ $rc -ne 0 ]; then fail=1; echo "layouts $name: exit $rc"; grep -Ev "Warning|warnings.warn|^\s*$" "$OUT/layouts/$name.log" | tail -30; fi
  done
fi
if [ "$what" = code ]; then
  # SymmRuntime.compile on CUDA: torchtitan's tiny Llama3 on 4 ranks sharing
  # the GPU, compiled into DIR/code by fresh rank processes (run "code"),
  # then served from there by others (run "code_again")
  CD=/tmp/magi-code; rm -rf "$CD"; mkdir -p "$OUT/code"
  stamp "code: rt.compile, then the stored code in fresh processes"
  MAGI_AOT_OPS=${MAGI_AOT_OPS:-c++} timeout 400 python3 python/tests/titan_e2e.py --out "$CD" --device cuda --world 4 \
    --vocab 1000 --mp fp32 --runs code,code_again --timeout 380 >"$OUT/code/code.log" 2>&1
  rc=$?
  grep -E "^titan_e2e" "$OUT/code/code.log" | grep -Ev "^titan_e2e save" | cut -c1-400
  if [ $rc -ne 0 ]; then fail=1; grep -Ev "Warning|warnings.warn|^\s*$" "$OUT/code/code.log" | tail -30; fi
fi
stamp "done, fail=$fail"
exit $fail
