# Per-test time limits for slow or busy machines: every TIMEOUT the test
# fragments set (and CTest's default 1500 s where none is set) is multiplied
# by MAGI_TEST_TIMEOUT_SCALE, a positive number such as 3 or 2.5, taken from
# -DMAGI_TEST_TIMEOUT_SCALE or else from the environment variable of that
# name when configuring (scripts/test.sh configures every run; docs/TESTS.md).
# Included by the root CMakeLists.txt (and by tests/test_stages.sh's small
# project); a value that is not a positive number stops the configure.
if(DEFINED MAGI_TEST_TIMEOUT_SCALE)
  set(MAGI_TIMEOUT_SCALE "${MAGI_TEST_TIMEOUT_SCALE}")
elseif(DEFINED ENV{MAGI_TEST_TIMEOUT_SCALE} AND NOT "$ENV{MAGI_TEST_TIMEOUT_SCALE}" STREQUAL "")
  set(MAGI_TIMEOUT_SCALE "$ENV{MAGI_TEST_TIMEOUT_SCALE}")
else()
  set(MAGI_TIMEOUT_SCALE 1)
endif()
# The scale in thousandths (integer arithmetic: math(EXPR) has no fractions).
if(NOT MAGI_TIMEOUT_SCALE MATCHES "^([0-9]+)(\\.([0-9]*))?$")
  message(FATAL_ERROR "MAGI_TEST_TIMEOUT_SCALE=${MAGI_TIMEOUT_SCALE}: give a positive number, e.g. 3 or 2.5")
endif()
set(_frac "${CMAKE_MATCH_3}000")
string(SUBSTRING "${_frac}" 0 3 _frac)
math(EXPR MAGI_TIMEOUT_MILLI "${CMAKE_MATCH_1} * 1000 + 1${_frac} - 1000")
if(MAGI_TIMEOUT_MILLI LESS 1)
  message(FATAL_ERROR "MAGI_TEST_TIMEOUT_SCALE=${MAGI_TIMEOUT_SCALE}: give a positive number, e.g. 3 or 2.5")
endif()
# magi_scale_test_timeouts(): applies the scale to the tests of the calling
# directory; called once at the end of each directory that adds tests.
function(magi_scale_test_timeouts)
  if(MAGI_TIMEOUT_MILLI EQUAL 1000)
    return()
  endif()
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    get_test_property(${t} TIMEOUT limit)
    if(NOT limit)
      set(limit 1500)
    endif()
    math(EXPR limit "(${limit} * ${MAGI_TIMEOUT_MILLI} + 999) / 1000")
    set_tests_properties(${t} PROPERTIES TIMEOUT ${limit})
  endforeach()
endfunction()
