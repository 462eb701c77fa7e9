# The loader (src/load): report, verification once, safe rewrite decisions,
# transport choice and round trip, explicit process groups over 4 ranks.
magi_add_unit_test(test_load SOURCES ${PROJECT_SOURCE_DIR}/tests/test_load.c LABELS unit)
add_dependencies(test_load magi-aot)
