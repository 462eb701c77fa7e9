# Hostile inputs for every reader (JSON, expressions, artifact v1, legacy v0),
# each in a forked child with its peak RSS checked (< 64 MiB). The fuzz
# corpora replay as fuzz_replay_* tests from fuzz/CMakeLists.txt.
magi_add_unit_test(test_hostile SOURCES ${PROJECT_SOURCE_DIR}/tests/test_hostile.c LABELS unit hostile)
