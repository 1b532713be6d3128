# ABI stability checks (included from tests/CMakeLists.txt):
#  - the dynamic symbols of libvegas.so equal tests/abi/exported_symbols.txt;
#  - vegas.h compiles alone as C99 and as C++17 with every warning an error.
find_program(VEGAS_NM NAMES nm REQUIRED)
add_test(NAME abi_exported_symbols
         COMMAND ${CMAKE_COMMAND} -DNM=${VEGAS_NM} -DLIB=$<TARGET_FILE:vegas>
                 -DEXPECTED=${CMAKE_CURRENT_LIST_DIR}/exported_symbols.txt
                 -P ${CMAKE_CURRENT_LIST_DIR}/check_exports.cmake)
set_tests_properties(abi_exported_symbols PROPERTIES LABELS cpu)

set(_vegas_header ${CMAKE_SOURCE_DIR}/include/vegas.h)
set(_vegas_strict -Wall -Wextra -Werror -pedantic -fsyntax-only)
add_test(NAME abi_header_c99
         COMMAND ${CMAKE_C_COMPILER} -std=c99 ${_vegas_strict} -x c ${_vegas_header})
add_test(NAME abi_header_cxx17
         COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 ${_vegas_strict} -x c++ ${_vegas_header})
set_tests_properties(abi_header_c99 abi_header_cxx17 PROPERTIES LABELS cpu)
