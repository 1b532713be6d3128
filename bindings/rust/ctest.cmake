# ctest `bindings_rust` (cargo test of vegas-sys and vegas against the built libvegas and
# CLI) and `samples_rust` (the streaming sample, built and run). Registered whenever cargo
# is found (so CI runs them without a flag); VEGAS_BUILD_BINDINGS=ON turns a missing cargo
# into an error. Not in sanitizer builds: the Rust test binaries are not instrumented.
if(NOT VEGAS_SANITIZE)
  find_program(VEGAS_CARGO cargo HINTS $ENV{HOME}/.cargo/bin)
  if(VEGAS_CARGO)
    # Offline: the crates use std only. Their build scripts read VEGAS_LIB_DIR.
    set(_rs_env "${VEGAS_TEST_ENV};VEGAS_LIB_DIR=$<TARGET_FILE_DIR:vegas>"
        "CARGO_TARGET_DIR=${CMAKE_BINARY_DIR}/cargo;CARGO_TERM_COLOR=never")
    if(TARGET vegas_cli)
      list(APPEND _rs_env "VEGAS_CLI=$<TARGET_FILE:vegas_cli>")
    endif()
    add_test(NAME bindings_rust
             COMMAND ${VEGAS_CARGO} test --offline --manifest-path ${CMAKE_SOURCE_DIR}/bindings/rust/Cargo.toml)
    add_test(NAME samples_rust
             COMMAND ${VEGAS_CARGO} run --offline --manifest-path ${CMAKE_SOURCE_DIR}/samples/rust/Cargo.toml
                     -- --backend cpu --max-tokens 8)
    set_tests_properties(bindings_rust samples_rust PROPERTIES LABELS cpu ENVIRONMENT "${_rs_env}")
  elseif(VEGAS_BUILD_BINDINGS)
    message(FATAL_ERROR "VEGAS_BUILD_BINDINGS=ON: the Rust binding tests need cargo")
  endif()
endif()
