# SPDX-License-Identifier: MIT
# Every dependency comes from the system (Debian packages, the CUDA toolkit);
# the build downloads nothing. libcuda is never linked: cumodd dlopens it.
include_guard(GLOBAL)
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(UV REQUIRED IMPORTED_TARGET libuv>=1.40)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c>=1.3)
# The configuration file's parser (Debian libinih-dev) and sd_notify
# (Debian libsystemd-dev).
pkg_check_modules(INIH REQUIRED IMPORTED_TARGET inih)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
if(CUMOD_BUILD_TESTS)
  pkg_check_modules(CRITERION REQUIRED IMPORTED_TARGET criterion>=2.4)
endif()

# nng ships a CMake package config; older ones only a header and library.
find_package(nng CONFIG QUIET)
if(TARGET nng::nng)
  set(CUMOD_NNG nng::nng)
else()
  find_path(NNG_INCLUDE_DIR nng/nng.h REQUIRED)
  find_library(NNG_LIBRARY nng REQUIRED)
  add_library(cumod_nng INTERFACE)
  target_include_directories(cumod_nng INTERFACE ${NNG_INCLUDE_DIR})
  target_link_libraries(cumod_nng INTERFACE ${NNG_LIBRARY})
  set(CUMOD_NNG cumod_nng)
endif()

# mbedtls's crypto library: SHA-256 of kernel images (daemon/image.c).
find_path(MBEDTLS_INCLUDE_DIR mbedtls/sha256.h REQUIRED)
find_library(MBEDCRYPTO_LIBRARY mbedcrypto REQUIRED)
add_library(cumod_mbedcrypto INTERFACE)
target_include_directories(cumod_mbedcrypto INTERFACE ${MBEDTLS_INCLUDE_DIR})
target_link_libraries(cumod_mbedcrypto INTERFACE ${MBEDCRYPTO_LIBRARY})
# mbed TLS itself: cumodd's TLS engine for nng (daemon/front/transport/tls.c).
find_library(MBEDTLS_LIBRARY mbedtls REQUIRED)
find_library(MBEDX509_LIBRARY mbedx509 REQUIRED)
add_library(cumod_mbedtls INTERFACE)
target_link_libraries(cumod_mbedtls INTERFACE ${MBEDTLS_LIBRARY}
  ${MBEDX509_LIBRARY} cumod_mbedcrypto)

find_program(PROTOC_C NAMES protoc-c protoc-gen-c REQUIRED)

# The CUDA toolkit: headers for the driver API types, nvcc for the kernels.
# CUDAToolkit_ROOT or CUDA_PATH point elsewhere than /usr/local/cuda.
set(_cumod_cuda_hints $ENV{CUDA_PATH} ${CUDAToolkit_ROOT} /usr/local/cuda)
find_path(CUMOD_CUDA_INCLUDE_DIR cuda.h HINTS ${_cumod_cuda_hints} PATH_SUFFIXES include REQUIRED)
find_program(CUMOD_NVCC nvcc HINTS ${_cumod_cuda_hints} PATH_SUFFIXES bin REQUIRED)
# NVRTC, for the tests of NAME.cu (the daemon loads it with dlopen at run
# time and needs nothing at build time); NOTFOUND: those tests skip.
find_library(CUMOD_NVRTC_LIBRARY NAMES nvrtc HINTS ${_cumod_cuda_hints}
  PATH_SUFFIXES lib64 lib targets/x86_64-linux/lib)
add_library(cumod_cuda_headers INTERFACE)
# SYSTEM: cuda.h is not ours to keep warning-free.
target_include_directories(cumod_cuda_headers SYSTEM INTERFACE ${CUMOD_CUDA_INCLUDE_DIR})
