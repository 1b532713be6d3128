# Compares the dynamic symbols libvegas.so defines with the committed list
# (tests/abi/exported_symbols.txt). Run as
#   cmake -DNM=<nm> -DLIB=<libvegas.so> -DEXPECTED=<list> -P check_exports.cmake
# A symbol added to or dropped from the ABI, or an internal symbol leaking out
# of the version script, fails the test and prints the difference.
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE nm_out
                RESULT_VARIABLE nm_rc)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${nm_rc})")
endif()
string(REPLACE "\n" ";" nm_lines "${nm_out}")
set(actual "")
foreach(line IN LISTS nm_lines)
  # "<address> <type> <name>[@version]"
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] ([^@ ]+)")
    list(APPEND actual "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(SORT actual)
list(REMOVE_DUPLICATES actual)

file(STRINGS ${EXPECTED} expected REGEX "^[^#]")
list(SORT expected)

set(extra ${actual})
list(REMOVE_ITEM extra ${expected})
set(missing ${expected})
list(REMOVE_ITEM missing ${actual})
foreach(sym IN LISTS actual)
  if(NOT sym MATCHES "^vegas_")
    list(APPEND leaked "${sym}")
  endif()
endforeach()
if(extra OR missing OR leaked)
  list(JOIN extra "\n  " extra_text)
  list(JOIN missing "\n  " missing_text)
  message(FATAL_ERROR "libvegas exports differ from ${EXPECTED}\n"
                      "exported but not listed:\n  ${extra_text}\n"
                      "listed but not exported:\n  ${missing_text}\n"
                      "not vegas_*: ${leaked}")
endif()
list(LENGTH actual n)
message(STATUS "libvegas exports exactly the ${n} listed vegas_* symbols")
