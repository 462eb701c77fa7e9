# The loader (src/load): report, verification once, safe rewrite decisions,
# transport choice and round trip, explicit process groups over 4 ranks.
magi_add_unit_test(test_load SOURCES ${PROJECT_SOURCE_DIR}/tests/test_load.c LABELS unit)
add_dependencies(test_load magi-aot)

# DTensor redistributes lowered at load: gather sequences, reasons, plans equal on every rank.
magi_add_unit_test(test_lower SOURCES ${PROJECT_SOURCE_DIR}/tests/test_lower.c LABELS unit)
target_compile_definitions(test_lower PRIVATE MAGI_TESTS_DIR="${PROJECT_SOURCE_DIR}/tests")

# magi-aot load of a torchtitan region on 2 rank processes: the lowering in the report.
add_test(NAME test_lower_cli
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/lower_cli_test.sh $<TARGET_FILE:magi-aot>
          ${PROJECT_SOURCE_DIR}/fixtures/titan/bf16_v1001_w2.json)
set_tests_properties(test_lower_cli PROPERTIES LABELS cli TIMEOUT 120)

# The rank-local form at load: shards before the plan, fingerprint as read, refusals named.
magi_add_unit_test(test_localize SOURCES ${PROJECT_SOURCE_DIR}/tests/test_localize.c LABELS unit)
target_compile_definitions(test_localize PRIVATE MAGI_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/fixtures")
