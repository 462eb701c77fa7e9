# Tests of the core module (src/core/). The core's file and directory
# handling meets hostile users in test_hostile_fs (hostile.cmake) and its
# struct-version check in test_api (api.cmake).
# The arena: records, cap, reset, and ASan poisoning of memory not handed out.
magi_add_unit_test(test_arena SOURCES ${PROJECT_SOURCE_DIR}/tests/test_arena.c LABELS unit)
