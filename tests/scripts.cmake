# The scripts a new user runs first: the test verdict of scripts/test.sh
# (skipped tests counted and named, with why) and its stages (every stage
# run after a failure, the verdict last, MAGI_TEST_TIMEOUT_SCALE). The
# demo is in cli.cmake.
find_program(MAGI_BASH bash)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(MAGI_BASH AND Python3_Interpreter_FOUND)
  add_test(NAME test_ctest_verdict COMMAND ${MAGI_BASH} ${PROJECT_SOURCE_DIR}/tests/test_ctest_verdict.sh
    ${Python3_EXECUTABLE} ${CMAKE_CTEST_COMMAND})
  set_tests_properties(test_ctest_verdict PROPERTIES LABELS unit TIMEOUT 60)
  add_test(NAME test_stages COMMAND ${MAGI_BASH} ${PROJECT_SOURCE_DIR}/tests/test_stages.sh
    ${Python3_EXECUTABLE} ${CMAKE_CTEST_COMMAND} ${CMAKE_COMMAND})
  set_tests_properties(test_stages PROPERTIES LABELS unit TIMEOUT 120)
endif()
