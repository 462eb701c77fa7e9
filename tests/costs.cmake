# Tests of the costs module (src/costs/): cost-table keys, tables and key
# sets, the analytical model and the values of unbacked symbols.
magi_add_unit_test(test_costs SOURCES ${PROJECT_SOURCE_DIR}/tests/test_costs.c)
