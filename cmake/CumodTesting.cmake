# SPDX-License-Identifier: MIT
# cumod_guarded_test(NAME <name> [DEADLINE <s>] COMMAND <cmd...>)
#   A test registered with CTest that runs under tests/suite_guard.c: past
#   its deadline (default 120 s, twice that in a sanitizer build) the guard
#   prints the running test, the stacks of every process the suite started
#   and the last lines of their logs, then kills them (exit 124). Its
#   output is also kept in <build>/test-logs/<name>.log. CTest's own
#   timeout is set two minutes past the deadline, for the report.
# cumod_add_test(<name> SOURCES <src...> [LIBS <lib...>] [DEADLINE <s>]
#                [LABELS <l...>] [DEPENDS <t...>])
#   A Criterion executable registered that way as <name>. Criterion's own
#   output (--verbose) shows each test and its summary in the CTest log.
include_guard(GLOBAL)

set(CUMOD_TEST_LOG_DIR ${CMAKE_BINARY_DIR}/test-logs)
file(MAKE_DIRECTORY ${CUMOD_TEST_LOG_DIR})

function(cumod_guarded_test)
  cmake_parse_arguments(PARSE_ARGV 0 G "" "NAME;DEADLINE" "COMMAND")
  if(NOT G_DEADLINE)
    set(G_DEADLINE 120)
  endif()
  if(CUMOD_SANITIZE)
    math(EXPR G_DEADLINE "${G_DEADLINE} * 2")
  endif()
  math(EXPR _ctest_timeout "${G_DEADLINE} + 60")
  add_test(NAME ${G_NAME}
    COMMAND $<TARGET_FILE:cumod_suite_guard> --name ${G_NAME}
            --deadline ${G_DEADLINE} --log ${CUMOD_TEST_LOG_DIR}/${G_NAME}.log
            -- ${G_COMMAND})
  set_tests_properties(${G_NAME} PROPERTIES TIMEOUT ${_ctest_timeout})
endfunction()

function(cumod_add_test name)
  cmake_parse_arguments(T "" "DEADLINE" "SOURCES;LIBS;LABELS;DEPENDS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE PkgConfig::CRITERION ${T_LIBS})
  if(T_DEPENDS)
    add_dependencies(${name} ${T_DEPENDS})
  endif()
  # -j1: the suites start daemons and time real events; on a 2-core machine
  # running a suite's tests one at a time keeps them honest.
  # DEADLINE only when given: an empty value after a keyword warns under
  # CMake 3.31's policy CMP0174.
  if(NOT T_DEADLINE)
    set(T_DEADLINE 120)
  endif()
  cumod_guarded_test(NAME ${name} DEADLINE ${T_DEADLINE}
    COMMAND $<TARGET_FILE:${name}> --verbose -j1)
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
endfunction()
