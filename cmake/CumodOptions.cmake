# SPDX-License-Identifier: MIT
# Project options and the compiler flags every target shares.
include_guard(GLOBAL)

option(CUMOD_BUILD_TESTS "Build the Criterion suites and register them with CTest" ON)
option(CUMOD_WERROR "Treat warnings as errors (on by default when CI=true)" OFF)
set(CUMOD_SANITIZE "" CACHE STRING
    "Comma-separated sanitizers to build with, e.g. address,undefined")
set(CUMOD_CUDA_ARCHS "90" CACHE STRING
    "SM versions the example kernels are compiled to as cubins (semicolon list, e.g. 80;90)")
set(CUMOD_FATBIN_ARCHS "80;90" CACHE STRING
    "SM versions embedded as SASS in the example fatbin (PTX of the highest is added)")
option(CUMOD_FUZZ "Build the libFuzzer harnesses of tests/fuzz (clang) and register them with CTest (label fuzz)" OFF)
set(CUMOD_FUZZ_SECONDS 60 CACHE STRING
    "How long CTest runs each fuzz harness, in seconds (-max_total_time)")

if(DEFINED ENV{CI} AND "$ENV{CI}" STREQUAL "true")
  set(CUMOD_WERROR ON)
endif()

set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

add_compile_options(-Wall -Wextra -Wstrict-prototypes -Wshadow -Wno-unused-parameter
                    -Wformat=2 -Wmissing-prototypes
                    # protobuf-c initialises oneof unions with {0}: not a bug
                    -Wno-missing-braces)
add_compile_definitions(_GNU_SOURCE)
if(CUMOD_WERROR)
  add_compile_options(-Werror)
endif()

# The fuzz build: libFuzzer comes with clang only. The harnesses run the
# daemon's code in their own process and cumodd as their executor, so both
# need the sanitizers' runtime; without a choice, ASan and UBSan.
if(CUMOD_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CUMOD_FUZZ needs clang (libFuzzer ships with it); "
      "this build uses ${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER}: configure a "
      "fresh build directory with CC=clang")
  endif()
  if(NOT CUMOD_BUILD_TESTS)
    message(FATAL_ERROR "CUMOD_FUZZ needs CUMOD_BUILD_TESTS=ON: the request "
      "harness runs the daemon on the fake driver of tests/fakecuda")
  endif()
  if(NOT CUMOD_FUZZ_SECONDS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "CUMOD_FUZZ_SECONDS: '${CUMOD_FUZZ_SECONDS}' is not a "
      "whole number of seconds")
  endif()
  if(NOT CUMOD_SANITIZE)
    set(CUMOD_SANITIZE address,undefined)
  endif()
  # Coverage for libFuzzer in everything built here; only the harnesses
  # link libFuzzer itself (-fsanitize=fuzzer, tests/fuzz). The sanitizers'
  # runtime answers the coverage calls in the other programs.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(CUMOD_SANITIZE)
  string(REPLACE "," ";" _cumod_san "${CUMOD_SANITIZE}")
  foreach(_s IN LISTS _cumod_san)
    if(NOT _s MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "CUMOD_SANITIZE: unknown sanitizer '${_s}'")
    endif()
  endforeach()
  add_compile_options(-fsanitize=${CUMOD_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${CUMOD_SANITIZE})
endif()

# cumod/version.h, shared by daemon and client (and installed with libcumod).
set(CUMOD_GENERATED_INCLUDE ${CMAKE_BINARY_DIR}/include)
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in
               ${CUMOD_GENERATED_INCLUDE}/cumod/version.h @ONLY)
