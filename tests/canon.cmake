# Canonical fingerprints, diff and cost-table keys (src/canon, tools/cmd_{fingerprint,diff,costs}.c).
magi_add_unit_test(test_canon SOURCES ${PROJECT_SOURCE_DIR}/tests/test_canon.c)
magi_add_unit_test(test_costs SOURCES ${PROJECT_SOURCE_DIR}/tests/test_costs.c)
magi_add_unit_test(test_canon_cli SOURCES ${PROJECT_SOURCE_DIR}/tests/test_canon_cli.c LABELS cli)
add_dependencies(test_canon_cli magi-aot)
