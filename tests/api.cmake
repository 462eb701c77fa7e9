# Public API habits: versioned options structs checked by every function
# that takes one (test_api), and the header audit (outputs first, version
# macros, UNSTABLE API fences: tests/api_habits.py).
magi_add_unit_test(test_api SOURCES ${PROJECT_SOURCE_DIR}/tests/test_api.c)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_api_habits
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/api_habits.py ${PROJECT_SOURCE_DIR}/include)
  set_tests_properties(test_api_habits PROPERTIES LABELS unit TIMEOUT 60)
endif()
