# The layering of docs/ARCHITECTURE.md ("Layering") kept equal to the
# tree's #include lines and its module table ("Modules") to the C files of
# src/ (scripts/check_layering.py), and the check itself
# run on small trees that break each rule (tests/test_check_layering.py).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_layering
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_layering.py ${PROJECT_SOURCE_DIR})
  add_test(NAME test_check_layering
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/test_check_layering.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_layering test_check_layering PROPERTIES LABELS unit TIMEOUT 60)
endif()
