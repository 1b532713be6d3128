# ctest `bindings_csharp`: the binding built with Mono's mcs, its NUnit-free test
# executable run with mono (struct layouts checked against tests/layout_dump.c),
# then the C# sample. Registered whenever mcs and mono are found; without them a
# test that reports itself skipped stands in (VEGAS_BUILD_BINDINGS=ON makes a
# missing toolchain an error). Not in sanitizer builds (mono is not instrumented).
if(NOT VEGAS_SANITIZE)
  find_program(VEGAS_MCS mcs)
  find_program(VEGAS_MONO mono)
  if(VEGAS_MCS AND VEGAS_MONO)
    add_executable(csharp_layout_dump ${CMAKE_SOURCE_DIR}/bindings/csharp/tests/layout_dump.c)
    set_target_properties(csharp_layout_dump PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
    target_compile_options(csharp_layout_dump PRIVATE -Wall -Wextra -Werror -pedantic)
    target_include_directories(csharp_layout_dump PRIVATE ${CMAKE_SOURCE_DIR}/include)
    set(_cs_env "${VEGAS_TEST_ENV};MCS=${VEGAS_MCS};MONO=${VEGAS_MONO}"
        "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:vegas>;VEGAS_CS_OUT=${CMAKE_BINARY_DIR}/csharp"
        "VEGAS_LAYOUT_DUMP=$<TARGET_FILE:csharp_layout_dump>")
    if(TARGET vegas_cli)
      list(APPEND _cs_env "VEGAS_CLI=$<TARGET_FILE:vegas_cli>")
    endif()
    add_test(NAME bindings_csharp COMMAND sh ${CMAKE_SOURCE_DIR}/bindings/csharp/run_tests.sh)
    set_tests_properties(bindings_csharp PROPERTIES LABELS cpu ENVIRONMENT "${_cs_env}")
  elseif(VEGAS_BUILD_BINDINGS)
    message(FATAL_ERROR "VEGAS_BUILD_BINDINGS=ON: the C# binding tests need mcs and mono "
                        "(apt-get install mono-mcs mono-runtime)")
  else()
    message(STATUS "libvegas: no mcs/mono; bindings_csharp will report itself skipped")
    add_test(NAME bindings_csharp COMMAND sh -c
             "echo 'bindings_csharp: SKIPPED: no mcs/mono (tools/install-deps.sh installs mono-mcs, mono-runtime)'; exit 77")
    set_tests_properties(bindings_csharp PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
  endif()
endif()
