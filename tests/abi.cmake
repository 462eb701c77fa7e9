# A caller built against an earlier release's options structs
# (tests/abi/prev_options.h, frozen) linked to the current shared library:
# older revisions accepted with new fields defaulted, newer or mis-sized
# ones refused. Built without MAGI_AOT_UNSTABLE_API and without the current
# load.h and symm.h.
add_executable(test_abi_prev ${PROJECT_SOURCE_DIR}/tests/abi/test_abi_prev.c ${PROJECT_SOURCE_DIR}/tests/testlib.c)
target_link_libraries(test_abi_prev PRIVATE magi_aot)
target_include_directories(test_abi_prev PRIVATE ${PROJECT_SOURCE_DIR}/tests/abi ${PROJECT_SOURCE_DIR}/tests)
target_compile_definitions(test_abi_prev PRIVATE _GNU_SOURCE MAGI_TESTS_DIR="${PROJECT_SOURCE_DIR}/tests"
  MAGI_FIXTURES_REAL="${MAGI_FIXTURES_REAL}" MAGI_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/fixtures"
  MAGI_CLI_PATH="$<TARGET_FILE:magi-aot>")
add_test(NAME test_abi_prev COMMAND test_abi_prev)
set_tests_properties(test_abi_prev PROPERTIES LABELS unit TIMEOUT 60)
