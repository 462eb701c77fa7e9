# Tests of the serialize module (src/serialize/): the artifact and the
# magi-fx JSON readers and writers, the document walk.

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

# magi-fx JSON v1 <-> IR (json_read.c, json_write.c).
magi_add_unit_test(test_json SOURCES ${PROJECT_SOURCE_DIR}/tests/test_json.c LABELS unit cli)
target_link_libraries(test_json PRIVATE PkgConfig::JANSSON)
# The document walk (docwalk.h) against the JSON writer; emitter contract.
magi_add_unit_test(test_docwalk SOURCES ${PROJECT_SOURCE_DIR}/tests/test_docwalk.c)
target_link_libraries(test_docwalk PRIVATE PkgConfig::JANSSON)
# Higher-order-op subgraphs: both readers, the writers, clone, fingerprint, limits.
magi_add_unit_test(test_subgraph SOURCES ${PROJECT_SOURCE_DIR}/tests/test_subgraph.c)
target_link_libraries(test_subgraph PRIVATE PkgConfig::JANSSON)
