# The scripts a new user runs first: the test verdict of scripts/test.sh
# (skipped tests counted and named, with why). The demo is in cli.cmake.
find_program(MAGI_BASH bash)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(MAGI_BASH AND Python3_Interpreter_FOUND)
  add_test(NAME test_ctest_verdict COMMAND ${MAGI_BASH} ${PROJECT_SOURCE_DIR}/tests/test_ctest_verdict.sh
    ${Python3_EXECUTABLE} ${CMAKE_CTEST_COMMAND})
  set_tests_properties(test_ctest_verdict PROPERTIES LABELS unit TIMEOUT 60)
endif()
