# SPDX-License-Identifier: MIT
# cumod_add_test(<name> SOURCES <src...> [LIBS <lib...>] [TIMEOUT <s>] [LABELS <l...>])
# A Criterion executable registered with CTest as <name>. Criterion's own
# output (--verbose) shows each test and its summary in the CTest log.
include_guard(GLOBAL)

function(cumod_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;DEPENDS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE PkgConfig::CRITERION ${T_LIBS})
  if(T_DEPENDS)
    add_dependencies(${name} ${T_DEPENDS})
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # -j1: the suites start daemons and time real events; on a 2-core machine
  # running a suite's tests one at a time keeps them honest.
  add_test(NAME ${name} COMMAND ${name} --verbose -j1)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
endfunction()
