# ctest `bindings_go`: `go vet` + `go test` of the cgo package against the built
# libvegas and CLI, then the Go sample (samples/go) built and run. Registered
# whenever `go` is found; without it a test that reports itself skipped stands
# in (VEGAS_BUILD_BINDINGS=ON makes a missing toolchain an error). Not in
# sanitizer builds: a Go binary does not load the sanitizer runtimes.
if(NOT VEGAS_SANITIZE)
  find_program(VEGAS_GO go)
  if(VEGAS_GO)
    set(_go_env "${VEGAS_TEST_ENV};GO=${VEGAS_GO}"
        "CGO_CFLAGS=-I${CMAKE_SOURCE_DIR}/include"
        "CGO_LDFLAGS=-L$<TARGET_FILE_DIR:vegas> -Wl,-rpath,$<TARGET_FILE_DIR:vegas>"
        # No network, and the caches stay in the build tree.
        "GOPROXY=off;GOFLAGS=-mod=mod;GOCACHE=${CMAKE_BINARY_DIR}/go/cache"
        "GOPATH=${CMAKE_BINARY_DIR}/go/path;VEGAS_GO_OUT=${CMAKE_BINARY_DIR}/go")
    if(TARGET vegas_cli)
      list(APPEND _go_env "VEGAS_CLI=$<TARGET_FILE:vegas_cli>")
    endif()
    add_test(NAME bindings_go COMMAND sh ${CMAKE_SOURCE_DIR}/bindings/go/run_tests.sh)
    set_tests_properties(bindings_go PROPERTIES LABELS cpu ENVIRONMENT "${_go_env}")
  elseif(VEGAS_BUILD_BINDINGS)
    message(FATAL_ERROR "VEGAS_BUILD_BINDINGS=ON: the Go binding tests need go (apt-get install golang-go)")
  else()
    message(STATUS "libvegas: no Go toolchain; bindings_go will report itself skipped")
    add_test(NAME bindings_go COMMAND sh -c
             "echo 'bindings_go: SKIPPED: no Go toolchain (tools/install-deps.sh installs golang-go)'; exit 77")
    set_tests_properties(bindings_go PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
  endif()
endif()
