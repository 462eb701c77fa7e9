# The loader (src/load): report, verification once, safe rewrite decisions,
# transport choice and round trip, explicit process groups over 4 ranks.
magi_add_unit_test(test_load SOURCES ${PROJECT_SOURCE_DIR}/tests/test_load.c LABELS unit)
add_dependencies(test_load magi-aot)

# DTensor redistributes lowered at load: gather sequences, reasons, plans equal on every rank.
magi_add_unit_test(test_lower SOURCES ${PROJECT_SOURCE_DIR}/tests/test_lower.c LABELS unit)
target_compile_definitions(test_lower PRIVATE MAGI_TESTS_DIR="${PROJECT_SOURCE_DIR}/tests")
