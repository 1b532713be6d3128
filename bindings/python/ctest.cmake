# ctest `bindings_python` (the pytest suite of the ctypes package against the built
# libvegas and CLI) and `samples_python` (the streaming sample). Registered whenever
# Python 3 with pytest is found (so CI runs them without a flag); VEGAS_BUILD_BINDINGS=ON
# turns a missing toolchain into an error.
# Not in sanitizer builds: the interpreter is not instrumented.
if(NOT VEGAS_SANITIZE)
  find_package(Python3 COMPONENTS Interpreter)
  set(_vegas_pytest_ok FALSE)
  if(Python3_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pytest"
                    RESULT_VARIABLE _vegas_pytest_rc OUTPUT_QUIET ERROR_QUIET)
    if(_vegas_pytest_rc EQUAL 0)
      set(_vegas_pytest_ok TRUE)
    endif()
  endif()
  if(_vegas_pytest_ok)
    set(_py_env "${VEGAS_TEST_ENV};VEGAS_LIBRARY=$<TARGET_FILE:vegas>"
        "PYTHONPATH=${CMAKE_SOURCE_DIR}/bindings/python;PYTHONDONTWRITEBYTECODE=1")
    if(TARGET vegas_cli)
      list(APPEND _py_env "VEGAS_CLI=$<TARGET_FILE:vegas_cli>")
    endif()
    add_test(NAME bindings_python
             COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
                     ${CMAKE_SOURCE_DIR}/bindings/python/tests)
    add_test(NAME samples_python
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/samples/python/complete.py
                     --backend cpu --max-tokens 8)
    set_tests_properties(bindings_python samples_python PROPERTIES LABELS cpu ENVIRONMENT "${_py_env}")
  elseif(VEGAS_BUILD_BINDINGS)
    message(FATAL_ERROR "VEGAS_BUILD_BINDINGS=ON: the Python binding tests need python3 with pytest")
  endif()
endif()
