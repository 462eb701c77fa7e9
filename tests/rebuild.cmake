# Tests of the rebuild module: fake inputs from placeholder metadata and the
# cross-process artifact cache.
magi_add_unit_test(test_cache SOURCES ${PROJECT_SOURCE_DIR}/tests/test_cache.c LABELS unit cli)
magi_add_unit_test(test_cache_xproc SOURCES ${PROJECT_SOURCE_DIR}/tests/test_cache_xproc.c LABELS crossproc)
magi_add_unit_test(test_inputs SOURCES ${PROJECT_SOURCE_DIR}/tests/test_inputs.c LABELS unit cli)

