magi_add_unit_test(test_json SOURCES ${PROJECT_SOURCE_DIR}/tests/test_json.c)
target_link_libraries(test_json PRIVATE PkgConfig::JANSSON)
