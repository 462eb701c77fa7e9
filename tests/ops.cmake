# The operator and dtype tables (src/graph/ops.c): plan, schedule and costs agree with them.
magi_add_unit_test(test_ops SOURCES ${PROJECT_SOURCE_DIR}/tests/test_ops.c)
