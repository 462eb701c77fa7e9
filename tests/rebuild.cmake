# Tests of the rebuild module (src/rebuild/): input descriptors from
# placeholder metadata (the API and `magi-aot inputs`).
magi_add_unit_test(test_inputs SOURCES ${PROJECT_SOURCE_DIR}/tests/test_inputs.c LABELS unit cli)
