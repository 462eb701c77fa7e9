# Hostile strings and numbers in what the CLI prints: terminal escapes in
# every text output and error line, strict JSON and SVG (python3 parses
# them) for huge costs and names that are not UTF-8.
find_package(Python3 COMPONENTS Interpreter QUIET)
magi_add_unit_test(test_hostile_out SOURCES ${PROJECT_SOURCE_DIR}/tests/test_hostile_out.c LABELS unit hostile)
add_dependencies(test_hostile_out magi-aot)
if(Python3_Interpreter_FOUND)
  set(MAGI_TEST_PYTHON ${Python3_EXECUTABLE})
else()
  set(MAGI_TEST_PYTHON /usr/bin/python3)
endif()
target_compile_definitions(test_hostile_out PRIVATE MAGI_PYTHON="${MAGI_TEST_PYTHON}"
  MAGI_CHECK_OUTPUT_PY="${PROJECT_SOURCE_DIR}/tests/check_output.py")
