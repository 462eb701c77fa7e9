# A C++ runtime calling the torch extension's kernels without Python
# (tests/test_ops_cpp.cpp): built and registered only when the extension
# is (MAGI_HAVE_TORCH_OPS, the root CMakeLists.txt), linked to the libtorch
# the extension was built against; it dlopens the extension itself.
if(MAGI_HAVE_TORCH_OPS)
  add_executable(test_ops_cpp ${PROJECT_SOURCE_DIR}/tests/test_ops_cpp.cpp)
  target_include_directories(test_ops_cpp PRIVATE ${PROJECT_SOURCE_DIR}/include
    ${PROJECT_SOURCE_DIR}/python/magi_aot/csrc)
  target_link_libraries(test_ops_cpp PRIVATE magi_aot ${TORCH_LIBRARIES} ${CMAKE_DL_LIBS})
  target_compile_definitions(test_ops_cpp PRIVATE MAGI_TORCH_OPS_PATH="$<TARGET_FILE:magi_torch_ops>"
    MAGI_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set_target_properties(test_ops_cpp PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
  add_dependencies(test_ops_cpp magi_torch_ops)
  add_test(NAME test_ops_cpp COMMAND test_ops_cpp)
  set_tests_properties(test_ops_cpp PROPERTIES LABELS "torch;nosan" TIMEOUT 300)
endif()
