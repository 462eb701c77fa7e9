# SymmBuffer planning, copy-engine rewrite, host backend, `magi-aot load`.
magi_add_unit_test(test_symm SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm.c LABELS unit)
# Coalesced-gather geometry: flat output layout and 2D runs (no GPU).
magi_add_unit_test(test_symm_bucket SOURCES ${PROJECT_SOURCE_DIR}/tests/test_symm_bucket.c LABELS unit)
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
