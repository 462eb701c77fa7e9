# Python package tests (python/tests, stdlib unittest): the ctypes binding on
# the real fixtures; torch-dependent tests skip with a reason where torch is
# not importable. Not run under the sanitizer build: an ASan-instrumented
# libmagi_aot cannot be dlopen'ed into a plain python3 (label nosan).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND NOT MAGI_SANITIZE)
  add_test(NAME test_python
    COMMAND ${Python3_EXECUTABLE} -m unittest discover -s ${PROJECT_SOURCE_DIR}/python/tests -v
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # MAGI_DOCBUILD_EXPECTED=1 when the build made the document extension
  # (CMakeLists.txt): test_docio then fails, not skips, when it is missing.
  if(MAGI_HAVE_PYEXT)
    set(MAGI_DOCBUILD_EXPECTED 1)
  else()
    set(MAGI_DOCBUILD_EXPECTED 0)
  endif()
  set_tests_properties(test_python PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 1200
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;MAGI_CLI=$<TARGET_FILE:magi-aot>;MAGI_FIXTURES_REAL=${MAGI_FIXTURES_REAL};PYTHONDONTWRITEBYTECODE=1;MAGI_DOCBUILD_EXPECTED=${MAGI_DOCBUILD_EXPECTED}")
  # The model zoo (python/tests/zoo_ci.py: tiny transformers models traced,
  # saved, reloaded in a fresh process, rebuilt): its own test, so its
  # compile time has its own budget.
  add_test(NAME test_python_zoo
    COMMAND ${Python3_EXECUTABLE} -m unittest -v zoo_ci
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_zoo PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 900
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;MAGI_CLI=$<TARGET_FILE:magi-aot>;MAGI_FIXTURES_REAL=${MAGI_FIXTURES_REAL};PYTHONDONTWRITEBYTECODE=1")
  # The warm start at warm_start's defaults on stock transformers models
  # (python/tests/warm_models_ci.py: two fresh processes sharing one cache).
  add_test(NAME test_python_warm_models
    COMMAND ${Python3_EXECUTABLE} -m unittest -v warm_models_ci
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_warm_models PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 900
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;MAGI_CLI=$<TARGET_FILE:magi-aot>;PYTHONDONTWRITEBYTECODE=1")
  # The SymmBuffer runtime (python/tests/runtime_ci.py: 4 thread ranks, and
  # examples/fsdp_e2e.py as 4 rank processes with one Inductor compile): its
  # own test, so its process start-up and compile have their own budget.
  # The operators run through the C++ kernels (magi_aot/_C) where the
  # build made them (MAGI_AOT_OPS=c++: the run fails if they do not load),
  # and the operator tests run once more through the Python fallback
  # (test_python_runtime_pyops).
  if(MAGI_HAVE_TORCH_OPS)
    set(MAGI_RUNTIME_OPS "c++")
    set(MAGI_TORCH_OPS_EXPECTED 1)
  else()
    set(MAGI_RUNTIME_OPS "auto")
    set(MAGI_TORCH_OPS_EXPECTED 0)
  endif()
  add_test(NAME test_python_runtime
    COMMAND ${Python3_EXECUTABLE} -m unittest -v runtime_ci
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_runtime PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 900
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;MAGI_CLI=$<TARGET_FILE:magi-aot>;MAGI_FIXTURES_REAL=${MAGI_FIXTURES_REAL};PYTHONDONTWRITEBYTECODE=1;MAGI_AOT_OPS=${MAGI_RUNTIME_OPS};MAGI_TORCH_OPS_EXPECTED=${MAGI_TORCH_OPS_EXPECTED}")
  # SymmRuntime.compile (python/tests/runtime_code_ci.py): fresh processes
  # of 4 thread ranks share one cache; the first compiles with Inductor,
  # the later ones load the stored code. Its own test: its compiles have
  # their own budget.
  add_test(NAME test_python_runtime_code
    COMMAND ${Python3_EXECUTABLE} -m unittest -v runtime_code_ci
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_runtime_code PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 900
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;MAGI_CLI=$<TARGET_FILE:magi-aot>;PYTHONDONTWRITEBYTECODE=1;MAGI_AOT_OPS=${MAGI_RUNTIME_OPS}")
  add_test(NAME test_python_runtime_pyops
    COMMAND ${Python3_EXECUTABLE} -m unittest -v runtime_ci.OperatorImplementation runtime_ci.RuntimeThreads
      runtime_ci.ViewsOfBoundShards runtime_ci.AliasLifetime runtime_ci.MixedBucketFourProcesses
      runtime_ci.DeferredJoin runtime_ci.JoinedWaitsFourThreads
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_runtime_pyops PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 600
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;MAGI_FIXTURES_REAL=${MAGI_FIXTURES_REAL};PYTHONDONTWRITEBYTECODE=1;MAGI_AOT_OPS=python")
  # torchtitan's SimpleFSDP saved and run from the artifact in fresh rank
  # processes (python/tests/titan_ci.py; torchtitan from requirements-titan.txt).
  add_test(NAME test_python_titan
    COMMAND ${Python3_EXECUTABLE} -m unittest -v titan_ci
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_titan PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 900
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;PYTHONDONTWRITEBYTECODE=1")
  # HSDP and the MoE's expert layouts, 4 rank processes per run
  # (python/tests/titan_layouts_ci.py).
  add_test(NAME test_python_titan_layouts
    COMMAND ${Python3_EXECUTABLE} -m unittest -v titan_layouts_ci
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/python/tests)
  set_tests_properties(test_python_titan_layouts PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 1500
    ENVIRONMENT "MAGI_AOT_LIB=$<TARGET_FILE:magi_aot>;PYTHONDONTWRITEBYTECODE=1")
  # The type check (scripts/typecheck.sh): the pinned mypy of
  # python/requirements-typecheck.txt, in a virtual environment of its own
  # under the build tree, over the package with python/pyproject.toml's
  # [tool.mypy], and the checks that it fails where it must
  # (python/tests/typecheck_ci.py). No torch; the first run installs mypy
  # from the package index.
  add_test(NAME test_python_types
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/typecheck.sh ${CMAKE_BINARY_DIR}/typecheck-venv ${Python3_EXECUTABLE})
  set_tests_properties(test_python_types PROPERTIES
    LABELS "python;nosan"
    TIMEOUT 300
    ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
  # `pip install './python[torch]'` in a fresh virtual environment, no
  # MAGI_AOT_LIB: the package builds and bundles the library, the
  # extensions (the C++ operators among them) and the magi-aot command
  # (tests/pip_install_test.sh; it needs the package index for its build
  # requirements; the C++ operators compile against torch's headers).
  add_test(NAME install_pip_package
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/pip_install_test.sh ${PROJECT_SOURCE_DIR} ${Python3_EXECUTABLE})
  set_tests_properties(install_pip_package PROPERTIES
    LABELS "python;install;nosan"
    TIMEOUT 1200)
elseif(NOT Python3_Interpreter_FOUND)
  message(STATUS "magi-aot: python3 not found, Python tests not registered")
endif()
