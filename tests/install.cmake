# find_package(MagiAOT) and pkg-config work from an installed prefix.
add_test(NAME install_find_package
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/install_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
          "${Python3_EXECUTABLE}")
set_tests_properties(install_find_package PROPERTIES LABELS "install;nosan" TIMEOUT 300)
