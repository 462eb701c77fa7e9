# Hostile inputs for every reader (JSON, expressions, artifact v1, legacy v0),
# each in a forked child with its peak RSS checked (< 64 MiB). The fuzz
# corpora replay as fuzz_replay_* tests from fuzz/CMakeLists.txt.
magi_add_unit_test(test_hostile SOURCES ${PROJECT_SOURCE_DIR}/tests/test_hostile.c LABELS unit hostile)
# Hostile local users and shared directories (rendezvous, cache, small
# tmpfs); cross-user cases run as root only and say why they skip otherwise.
magi_add_unit_test(test_hostile_fs SOURCES ${PROJECT_SOURCE_DIR}/tests/test_hostile_fs.c LABELS unit hostile)
add_dependencies(test_hostile_fs magi-aot)
