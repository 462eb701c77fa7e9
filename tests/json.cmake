magi_add_unit_test(test_json SOURCES ${PROJECT_SOURCE_DIR}/tests/test_json.c)
target_link_libraries(test_json PRIVATE PkgConfig::JANSSON)
# The document walk (docwalk.h) against the JSON writer; emitter contract.
magi_add_unit_test(test_docwalk SOURCES ${PROJECT_SOURCE_DIR}/tests/test_docwalk.c)
target_link_libraries(test_docwalk PRIVATE PkgConfig::JANSSON)
# Higher-order-op subgraphs: both readers, the writers, clone, fingerprint, limits.
magi_add_unit_test(test_subgraph SOURCES ${PROJECT_SOURCE_DIR}/tests/test_subgraph.c)
target_link_libraries(test_subgraph PRIVATE PkgConfig::JANSSON)
