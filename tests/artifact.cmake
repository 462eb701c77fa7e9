# Artifact v1 / legacy v0 / atomic save / bounded msgpack reader.
magi_add_unit_test(test_artifact SOURCES ${PROJECT_SOURCE_DIR}/tests/test_artifact.c LABELS unit)
# Allocation accounting for hostile-header cases.
target_link_options(test_artifact PRIVATE
  -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=free)

magi_add_unit_test(test_artifact_cli SOURCES ${PROJECT_SOURCE_DIR}/tests/test_artifact_cli.c LABELS cli)
target_link_libraries(test_artifact_cli PRIVATE PkgConfig::JANSSON)
add_dependencies(test_artifact_cli magi-aot)

# Fixture generator for fixtures/v0 (not a test).
add_executable(make_v0_fixtures ${PROJECT_SOURCE_DIR}/tests/make_v0_fixtures.c)
target_link_libraries(make_v0_fixtures PRIVATE magi_aot_static)

# The opaque COMPILED section: round trip, verify, skip, hostile sizes, CLI.
magi_add_unit_test(test_compiled_section SOURCES ${PROJECT_SOURCE_DIR}/tests/test_compiled_section.c LABELS unit)
add_dependencies(test_compiled_section magi-aot)

# The arena: records, cap, reset, and ASan poisoning of memory not handed out.
magi_add_unit_test(test_arena SOURCES ${PROJECT_SOURCE_DIR}/tests/test_arena.c LABELS unit)
