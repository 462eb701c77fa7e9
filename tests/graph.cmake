# Tests of the graph module (src/graph/): the IR's expressions and its
# operator and dtype tables.

# Expression parser / printer / evaluator (src/graph/expr.c).
magi_add_unit_test(test_expr SOURCES ${PROJECT_SOURCE_DIR}/tests/test_expr.c LABELS unit)

# Parse/print/eval throughput benchmark (prints numbers; not a test).
add_executable(bench_expr ${PROJECT_SOURCE_DIR}/bench/bench_expr.c)
target_link_libraries(bench_expr PRIVATE magi_aot_static)

# The operator and dtype tables (src/graph/ops.c): plan, schedule and costs agree with them.
magi_add_unit_test(test_ops SOURCES ${PROJECT_SOURCE_DIR}/tests/test_ops.c)
