# Tests of the cache module (src/cache/): the cross-process artifact cache
# (the API and `magi-aot cache`), and its publication protocol across
# processes.
magi_add_unit_test(test_cache SOURCES ${PROJECT_SOURCE_DIR}/tests/test_cache.c LABELS unit cli)
magi_add_unit_test(test_cache_xproc SOURCES ${PROJECT_SOURCE_DIR}/tests/test_cache_xproc.c LABELS crossproc)
