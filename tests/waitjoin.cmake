# The loader's wait join of rewritten coalesced gathers (src/symm/rewrite.c).
magi_add_unit_test(test_wait_join SOURCES ${PROJECT_SOURCE_DIR}/tests/test_wait_join.c LABELS unit)
target_compile_definitions(test_wait_join PRIVATE MAGI_TESTS_DIR="${PROJECT_SOURCE_DIR}/tests")
