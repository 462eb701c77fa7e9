# Tests of the symm module (src/symm/): SymmBuffer planning, the copy-engine
# rewrite and the loader's wait join, the host backend, `magi-aot load`, and
# the cuda backend (its socket rendezvous everywhere, the rest with CUDA).

# SymmBuffer planning, copy-engine rewrite, host backend, `magi-aot load`.
magi_add_unit_test(test_symm SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm.c LABELS unit)
# Coalesced-gather geometry: flat output layout and 2D runs (no GPU).
magi_add_unit_test(test_symm_bucket SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_bucket.c LABELS unit)
# The registry of bound tensors the operator kernels look their inputs up in.
magi_add_unit_test(test_symm_registry SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_registry.c LABELS unit)
target_link_libraries(test_symm_registry PRIVATE Threads::Threads)
magi_add_unit_test(test_symm_crossproc SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_crossproc.c LABELS crossproc)
magi_add_unit_test(test_symm_cli SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_cli.c LABELS cli)
add_dependencies(test_symm_cli magi-aot)
add_dependencies(test_symm_crossproc magi-aot)

# Benchmark (not a test): host gather of 4 x 64 MiB shards vs one memcpy.
add_executable(bench_symm_gather ${PROJECT_SOURCE_DIR}/tests/bench_symm_gather.c)
target_link_libraries(bench_symm_gather PRIVATE magi_aot_static)
target_compile_definitions(bench_symm_gather PRIVATE _GNU_SOURCE)
# Ranks killed (SIGKILL) before and during the host rendezvous leave no file.
magi_add_unit_test(test_symm_kill SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_kill.c LABELS crossproc hostile)

# The loader's wait join of rewritten coalesced gathers (src/symm/rewrite.c).
magi_add_unit_test(test_wait_join SOURCES ${PROJECT_SOURCE_DIR}/tests/test_wait_join.c LABELS unit)
target_compile_definitions(test_wait_join PRIVATE MAGI_TESTS_DIR="${PROJECT_SOURCE_DIR}/tests")

# cuda SymmBuffer backend (docs/CUDA.md).
# The socket rendezvous needs no GPU and runs everywhere.
magi_add_unit_test(test_symm_sock SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_sock.c LABELS crossproc)
# GPU tests: built when the CUDA toolkit is found; exit 77 (skip) without a device.
if(MAGI_HAVE_CUDA)
  # The graph cache on the CPU, against the dry run's host-only graph calls.
  magi_add_unit_test(test_symm_graph SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_graph.c
                     ${PROJECT_SOURCE_DIR}/bench/multigpu/fake/fake_graph.c)
  target_include_directories(test_symm_graph SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  magi_add_unit_test(test_symm_cuda SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_cuda.c LABELS cuda)
  target_link_libraries(test_symm_cuda PRIVATE CUDA::cudart)
  target_compile_definitions(test_symm_cuda PRIVATE MAGI_HAVE_CUDA)
  if(MAGI_HAVE_NCCL)
    target_compile_definitions(test_symm_cuda PRIVATE MAGI_HAVE_NCCL)
    target_include_directories(test_symm_cuda SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(test_symm_cuda PRIVATE ${NCCL_LIBRARY})
  endif()
endif()

# Benchmark program (not a test): bench/bench_symm_cuda.c, run by bench/gpu_cuda.sh.
if(MAGI_HAVE_CUDA AND TARGET CUDA::cublas)
  add_executable(bench_symm_cuda ${PROJECT_SOURCE_DIR}/bench/bench_symm_cuda.c ${PROJECT_SOURCE_DIR}/bench/bench_gemm.c)
  target_link_libraries(bench_symm_cuda PRIVATE magi_aot_static CUDA::cudart CUDA::cublas)
  target_include_directories(bench_symm_cuda PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(bench_symm_cuda PRIVATE _GNU_SOURCE MAGI_HAVE_CUDA)
  # Mixed-size coalesced gathers: batch path vs graph path (bench/gpu_cuda.sh).
  add_executable(bench_symm_mixed ${PROJECT_SOURCE_DIR}/bench/bench_symm_mixed.c ${PROJECT_SOURCE_DIR}/bench/gpu_clocks.c
    ${PROJECT_SOURCE_DIR}/bench/bench_gemm.c)
  target_link_libraries(bench_symm_mixed PRIVATE magi_aot_static CUDA::cudart CUDA::cublas Threads::Threads
    ${CMAKE_DL_LIBS} m)
  target_include_directories(bench_symm_mixed PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(bench_symm_mixed PRIVATE _GNU_SOURCE MAGI_HAVE_CUDA)
endif()
# CUPTI activity injection library (CUDA_INJECTION64_PATH): which engine ran
# a process's copies, and which kernels ran beside them (bench/gpu_cuda.sh,
# step gemm). It reads CUDA 13's activity records (CUpti_ActivityMemcpy6,
# CUpti_ActivityKernel10).
if(MAGI_HAVE_CUDA AND TARGET CUDA::cupti AND CUDAToolkit_VERSION VERSION_GREATER_EQUAL 13.0)
  add_library(cupti_copies MODULE ${PROJECT_SOURCE_DIR}/bench/cupti_copies.c)
  target_link_libraries(cupti_copies PRIVATE CUDA::cupti Threads::Threads)
  target_include_directories(cupti_copies SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(cupti_copies PRIVATE _GNU_SOURCE)
  set_target_properties(cupti_copies PROPERTIES C_VISIBILITY_PRESET hidden)
endif()
add_dependencies(test_symm_sock magi-aot)
if(TARGET test_symm_cuda)
  add_dependencies(test_symm_cuda magi-aot)
endif()
