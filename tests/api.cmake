# Public API habits: versioned options structs checked by every function
# that takes one (test_api), every public function called with NULL
# pointers and out-of-range indices (test_api_args, one child process per
# function), and the header audit (outputs first, version macros, UNSTABLE
# API fences, a test_api_args case for every declared function:
# tests/api_habits.py).
magi_add_unit_test(test_api SOURCES ${PROJECT_SOURCE_DIR}/tests/test_api.c)
magi_add_unit_test(test_api_args SOURCES ${PROJECT_SOURCE_DIR}/tests/test_api_args.c)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_api_habits
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/api_habits.py ${PROJECT_SOURCE_DIR}/include
            ${PROJECT_SOURCE_DIR}/tests/test_api_args.c)
  set_tests_properties(test_api_habits PROPERTIES LABELS unit TIMEOUT 60)
endif()
