# Tests of the sched module (src/sched/): the latest-safe-launch reorder,
# its guards, the gather timing and the SVG timeline.
magi_add_unit_test(test_schedule SOURCES ${PROJECT_SOURCE_DIR}/tests/test_schedule.c)
target_link_libraries(test_schedule PRIVATE PkgConfig::JANSSON)
