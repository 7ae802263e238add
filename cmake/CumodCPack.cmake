# SPDX-License-Identifier: MIT
# Debian packages (`cpack -G DEB` in the build folder, or `cmake --build
# build --target package`): one package per install component.
#   libcumod0     the shared library (libcumod.so.0)
#   libcumod-dev  headers, the .so link, pkg-config, the CMake package,
#                 libcumod(3)
#   cumodd        the daemon, its units, sysusers.d file, configuration
#                 file (a conffile) and cumodd(8); its postinst makes the
#                 user cumod and enables nothing
#   cumodctl      the command-line client, its completion and cumodctl(1)
# Dependencies come from dpkg-shlibdeps. The packages install under /usr
# (and /etc): build them from a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr, so that what cumodd has compiled in (the
# folder of --instance files) is where the package puts it. The component
# demo (cumod-demo, which names a file of the build) is in no package.
include_guard(GLOBAL)
include(GNUInstallDirs)

set(CUMOD_DEB_MAINTAINER "the cumod authors <cumod@example.org>" CACHE STRING
    "the Maintainer field of the Debian packages (Name <address>)")
set(CUMOD_DEB_RELEASE "1" CACHE STRING
    "the Debian revision of the packages (VERSION-RELEASE)")
set(_deb ${PROJECT_SOURCE_DIR}/deploy/debian)
set(_debout ${PROJECT_BINARY_DIR}/debian)
set(CUMOD_DEB_COMPONENTS libcumod0 libcumod-dev cumodd cumodctl)

# The release's date, from CHANGELOG.md's entry of this version
# ("## [0.1.0] - 2026-11-26"), for the Debian changelog.
file(STRINGS ${PROJECT_SOURCE_DIR}/CHANGELOG.md _cl_line
     REGEX "^## \\[${PROJECT_VERSION}\\] - [0-9]+-[0-9]+-[0-9]+")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/CHANGELOG.md)
if(_cl_line MATCHES "- ([0-9]+)-0*([0-9]+)-0*([0-9]+)")
  # Days since 1970-01-01 of a date (Howard Hinnant's days_from_civil).
  set(y ${CMAKE_MATCH_1})
  set(m ${CMAKE_MATCH_2})
  set(d ${CMAKE_MATCH_3})
  if(m LESS_EQUAL 2)
    math(EXPR y "${y} - 1")
  endif()
  math(EXPR era "${y} / 400")
  math(EXPR yoe "${y} - ${era} * 400")
  if(m GREATER 2)
    math(EXPR mp "${m} - 3")
  else()
    math(EXPR mp "${m} + 9")
  endif()
  math(EXPR doy "(153 * ${mp} + 2) / 5 + ${d} - 1")
  math(EXPR doe "${yoe} * 365 + ${yoe} / 4 - ${yoe} / 100 + ${doy}")
  math(EXPR _epoch "(${era} * 146097 + ${doe} - 719468) * 86400")
  set(_sde "$ENV{SOURCE_DATE_EPOCH}")
  set(ENV{SOURCE_DATE_EPOCH} ${_epoch})
  string(TIMESTAMP CUMOD_RELEASE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
  set(ENV{SOURCE_DATE_EPOCH} "${_sde}")
else()
  message(WARNING "CHANGELOG.md has no entry `## [${PROJECT_VERSION}] - YYYY-MM-DD`: "
    "the Debian changelog is dated today (tests/version_check.sh fails)")
  string(TIMESTAMP CUMOD_RELEASE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()

# Each package's /usr/share/doc/PACKAGE: copyright and changelog.Debian.gz
# (Debian policy 12.5, 12.7). In the packages only: EXCLUDE_FROM_ALL keeps
# them out of a plain `cmake --install`.
find_program(CUMOD_GZIP gzip)
foreach(c IN LISTS CUMOD_DEB_COMPONENTS)
  file(MAKE_DIRECTORY ${_debout}/${c})
  file(WRITE ${_debout}/${c}/changelog.Debian
"${c} (${PROJECT_VERSION}-${CUMOD_DEB_RELEASE}) unstable; urgency=medium

  * Release ${PROJECT_VERSION} (CHANGELOG.md of the cumod repository says what
    it holds).

 -- ${CUMOD_DEB_MAINTAINER}  ${CUMOD_RELEASE_DATE}
")
  if(CUMOD_GZIP)
    execute_process(COMMAND ${CUMOD_GZIP} -9nf ${_debout}/${c}/changelog.Debian
                    RESULT_VARIABLE rv)
  else()
    file(ARCHIVE_CREATE OUTPUT ${_debout}/${c}/changelog.Debian.gz
         PATHS ${_debout}/${c}/changelog.Debian FORMAT raw COMPRESSION GZip
         COMPRESSION_LEVEL 9 MTIME 0)
  endif()
  install(FILES ${_deb}/copyright ${_debout}/${c}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${c}
          COMPONENT ${c} EXCLUDE_FROM_ALL)
endforeach()

# The configuration file, a conffile of cumodd (where the unit code
# installs it: /etc for prefix /usr).
if(IS_ABSOLUTE "${CMAKE_INSTALL_SYSCONFDIR}")
  set(_etc "${CMAKE_INSTALL_SYSCONFDIR}")
else()
  set(_etc "/${CMAKE_INSTALL_SYSCONFDIR}")
endif()
file(WRITE ${_debout}/conffiles "${_etc}/cumod/cumodd.conf\n")
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  string(CONCAT CPACK_CUMOD_PREFIX_NOTE "this build is configured for prefix "
    "${CMAKE_INSTALL_PREFIX}: the packaged cumodd looks for --instance files in "
    "${CMAKE_INSTALL_FULL_SYSCONFDIR}/cumod, not /etc/cumod (configure with "
    "-DCMAKE_INSTALL_PREFIX=/usr for packages)")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cumod)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "the cumod authors")
set(CPACK_PACKAGE_CONTACT "${CUMOD_DEB_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL ${CUMOD_DEB_COMPONENTS})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${CUMOD_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CUMOD_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SOURCE cumod)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

set(CPACK_DEBIAN_LIBCUMOD0_PACKAGE_NAME libcumod0)
set(CPACK_DEBIAN_LIBCUMOD0_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBCUMOD0_PACKAGE_CONTROL_EXTRA "${_deb}/libcumod0/triggers")
set(CPACK_COMPONENT_LIBCUMOD0_DESCRIPTION
"client library of cumod: launch CUDA kernels held by cumodd
libcumod connects to cumodd, the daemon that keeps CUDA kernels loaded on
the GPU, and launches them, moves data and runs GEMMs through it over nng
or a shared-memory ring. Programs that use it need no CUDA context of
their own.")

set(CPACK_DEBIAN_LIBCUMOD-DEV_PACKAGE_NAME libcumod-dev)
set(CPACK_DEBIAN_LIBCUMOD-DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_LIBCUMOD-DEV_DEPENDS libcumod0)
# cumod.pc names libprotobuf-c (Requires.private): pkg-config needs its .pc.
set(CPACK_DEBIAN_LIBCUMOD-DEV_PACKAGE_DEPENDS "libprotobuf-c-dev")
set(CPACK_COMPONENT_LIBCUMOD-DEV_DESCRIPTION
"client library of cumod: development files
The header cumod/cumod.h, the pkg-config file (pkg-config --cflags --libs
cumod), the CMake package (find_package(cumod), target cumod::cumod) and
the manual page libcumod(3).")

set(CPACK_DEBIAN_CUMODD_PACKAGE_NAME cumodd)
set(CPACK_DEBIAN_CUMODD_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_CUMODD_PACKAGE_SUGGESTS "cumodctl")
set(CPACK_DEBIAN_CUMODD_PACKAGE_CONTROL_EXTRA
    "${_deb}/postinst;${_deb}/prerm;${_deb}/postrm;${_debout}/conffiles")
set(CPACK_COMPONENT_CUMODD_DESCRIPTION
"daemon that keeps CUDA kernels hot for client processes
cumodd holds a CUDA context on each GPU it serves, loads kernels (cubin,
fatbin, PTX, CUDA C++) from a watched folder with hot reload, and runs
launch requests of other processes (libcumod, cumodctl, Python) over nng
or shared memory, with fault isolation, quarantine and Prometheus metrics.
It loads the NVIDIA driver (libcuda.so.1) itself at run time.
The package installs the systemd units cumodd.service and cumodd@.service
and makes the user cumod; it enables and starts nothing.")

set(CPACK_DEBIAN_CUMODCTL_PACKAGE_NAME cumodctl)
set(CPACK_DEBIAN_CUMODCTL_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_CUMODCTL_DESCRIPTION
"command-line client of cumodd
cumodctl asks cumodd for its status, modules and sessions, loads, pins
and reloads modules, launches kernels, runs GEMMs and watches changes
(--json for scripts); with bash completion of commands and module names.")

# What cpack itself reads at package time (the prefix note).
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_BINARY_DIR}/CumodCPackProject.cmake)
file(WRITE ${CPACK_PROJECT_CONFIG_FILE}
"if(CPACK_CUMOD_PREFIX_NOTE)
  message(WARNING \"\${CPACK_CUMOD_PREFIX_NOTE}\")
endif()
")
include(CPack)
