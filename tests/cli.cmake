# The command line: option tables, --help, standard I/O, refusals
# (tools/cli_opts.c, tools/cli_io.c, every tools/cmd_*.c).
magi_add_unit_test(test_cli SOURCES ${PROJECT_SOURCE_DIR}/tests/test_cli.c
  LABELS cli)
target_link_libraries(test_cli PRIVATE magi_cli_tables)
add_dependencies(test_cli magi-aot)

# README.md's CLI block is exactly `magi-aot --help`.
add_test(NAME cli_readme
  COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:magi-aot> -DREADME=${PROJECT_SOURCE_DIR}/README.md
          -P ${PROJECT_SOURCE_DIR}/cmake/check_readme_cli.cmake)
set_tests_properties(cli_readme PROPERTIES LABELS cli)
target_link_libraries(test_cli PRIVATE util)
