# Expression parser / printer / evaluator (src/graph/expr.c).
magi_add_unit_test(test_expr SOURCES ${PROJECT_SOURCE_DIR}/tests/test_expr.c LABELS unit)

# Parse/print/eval throughput benchmark (prints numbers; not a test).
add_executable(bench_expr ${PROJECT_SOURCE_DIR}/bench/bench_expr.c)
target_link_libraries(bench_expr PRIVATE magi_aot_static)
