# The command line: option tables, --help, standard I/O, refusals
# (tools/cli_opts.c, tools/cli_io.c, every tools/cmd_*.c).
magi_add_unit_test(test_cli SOURCES ${PROJECT_SOURCE_DIR}/tests/test_cli.c
  LABELS cli)
target_link_libraries(test_cli PRIVATE magi_cli_tables PkgConfig::JANSSON m)
add_dependencies(test_cli magi-aot)

# README.md's CLI block is exactly `magi-aot --help`.
add_test(NAME cli_readme
  COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:magi-aot> -DREADME=${PROJECT_SOURCE_DIR}/README.md
          -P ${PROJECT_SOURCE_DIR}/cmake/check_readme_cli.cmake)
set_tests_properties(cli_readme PROPERTIES LABELS cli)
target_link_libraries(test_cli PRIVATE util)

# docs/MAGI_FX_JSON.md's complete example is a valid document.
add_test(NAME spec_example
  COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:magi-aot> -DSPEC=${PROJECT_SOURCE_DIR}/docs/MAGI_FX_JSON.md
          -DWORK=${CMAKE_CURRENT_BINARY_DIR} -P ${PROJECT_SOURCE_DIR}/cmake/check_spec_example.cmake)
set_tests_properties(spec_example PROPERTIES LABELS cli)

# The README's demo, end to end (4 rank processes on the host backend), and
# the benefit it shows: save from JSON against a fresh process's load.
add_test(NAME demo COMMAND bash ${PROJECT_SOURCE_DIR}/tests/check_demo.sh ${PROJECT_BINARY_DIR})
set_tests_properties(demo PROPERTIES LABELS "cli" TIMEOUT 300
  ENVIRONMENT "MAGI_DEMO_OUT=${CMAKE_CURRENT_BINARY_DIR}/demo-out;MAGI_DEMO_NO_BUILD=1")
