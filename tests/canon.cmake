# Tests of the canon module (src/canon/): canonical fingerprints
# (test_canon), and the commands over them and over the cost keys
# (tools/cmd_{fingerprint,diff,costs}.c, test_canon_cli).
magi_add_unit_test(test_canon SOURCES ${PROJECT_SOURCE_DIR}/tests/test_canon.c)
magi_add_unit_test(test_canon_cli SOURCES ${PROJECT_SOURCE_DIR}/tests/test_canon_cli.c LABELS cli)
add_dependencies(test_canon_cli magi-aot)
