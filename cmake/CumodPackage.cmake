# SPDX-License-Identifier: MIT
# libcumod.so and what a program needs to build against it once installed
# (`cmake --install build --prefix P`): the public headers under
# P/include/cumod, P/lib/pkgconfig/cumod.pc (`pkg-config --cflags --libs
# cumod`) and the CMake package cumod (`find_package(cumod)` gives the
# target cumod::cumod; a project that add_subdirectory()s cumod links the
# same name, an ALIAS). Install components (the Debian packages of
# cmake/CumodCPack.cmake): libcumod0 has the shared library, libcumod-dev
# the rest (headers, the .so link, pkg-config, the CMake package).
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CUMOD_PACKAGE_DIR ${CMAKE_CURRENT_LIST_DIR})

# cumod_shared_library(<target> OBJECTS <object library>)
# The shared libcumod (OUTPUT_NAME cumod, SOVERSION 0) from the object
# library's position-independent objects, with the protocol code linked in
# (cumod_proto is static and private: consumers need neither it nor nng's
# headers). Only the cumod_ names of cumod/cumod.h and cumod/errors.h are
# exported (cmake/libcumod.map).
function(cumod_shared_library target)
  cmake_parse_arguments(S "" "OBJECTS" "" ${ARGN})
  set(map ${CUMOD_PACKAGE_DIR}/libcumod.map)
  add_library(${target} SHARED $<TARGET_OBJECTS:${S_OBJECTS}>)
  target_link_libraries(${target} PRIVATE cumod_proto ${CUMOD_NNG} Threads::Threads)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/proto/include>
    $<BUILD_INTERFACE:${CUMOD_GENERATED_INCLUDE}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  # Nothing in the library calls the error list's functions, so the linker
  # would leave their archive member out: ask for them.
  target_link_options(${target} PRIVATE "LINKER:--undefined=cumod_strerror"
                      "LINKER:--undefined=cumod_errname")
  if(NOT CUMOD_SANITIZE)
    # Every symbol resolved now, not in a consumer's link (the sanitizer
    # runtimes are the executable's, so not under them).
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME cumod
    EXPORT_NAME cumod
    VERSION ${PROJECT_VERSION}
    SOVERSION 0
    C_VISIBILITY_PRESET hidden
    LINK_DEPENDS ${map})
  add_library(cumod::cumod ALIAS ${target})

  install(TARGETS ${target} EXPORT cumodTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
      COMPONENT libcumod0 NAMELINK_COMPONENT libcumod-dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES
    ${CMAKE_CURRENT_SOURCE_DIR}/include/cumod/cumod.h
    ${PROJECT_SOURCE_DIR}/proto/include/cumod/errors.h
    ${CUMOD_GENERATED_INCLUDE}/cumod/version.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cumod COMPONENT libcumod-dev)

  set(cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/cumod)
  install(EXPORT cumodTargets NAMESPACE cumod:: DESTINATION ${cmakedir}
    COMPONENT libcumod-dev)
  configure_package_config_file(${CUMOD_PACKAGE_DIR}/cumodConfig.cmake.in
    ${PROJECT_BINARY_DIR}/cumodConfig.cmake INSTALL_DESTINATION ${cmakedir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/cumodConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/cumodConfig.cmake
    ${PROJECT_BINARY_DIR}/cumodConfigVersion.cmake DESTINATION ${cmakedir}
    COMPONENT libcumod-dev)

  # cumod.pc is written at install time, so that it names the prefix
  # actually installed to (`cmake --install --prefix P` overrides the
  # configured CMAKE_INSTALL_PREFIX), into a folder of its own per
  # destination (installs to several prefixes may run at once: the tests,
  # cpack), then installed from there.
  install(CODE "
    set(CUMOD_PC_IN \"${CUMOD_PACKAGE_DIR}/cumod.pc.in\")
    set(CUMOD_PC_STAGE \"${PROJECT_BINARY_DIR}/pkgconfig-install\")
    set(CUMOD_PC_VERSION \"${PROJECT_VERSION}\")
    set(CUMOD_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
    set(CUMOD_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")" COMPONENT libcumod-dev)
  install(CODE [[
    set(CUMOD_PC_DEST "${CUMOD_PC_LIBDIR}/pkgconfig")
    if(NOT IS_ABSOLUTE "${CUMOD_PC_DEST}")
      set(CUMOD_PC_DEST "${CMAKE_INSTALL_PREFIX}/${CUMOD_PC_DEST}")
    endif()
    foreach(d LIBDIR INCLUDEDIR)
      if(NOT IS_ABSOLUTE "${CUMOD_PC_${d}}")
        set(CUMOD_PC_${d} "\${prefix}/${CUMOD_PC_${d}}")
      endif()
    endforeach()
    string(SHA1 CUMOD_PC_KEY "$ENV{DESTDIR}${CUMOD_PC_DEST}")
    set(CUMOD_PC_OUT "${CUMOD_PC_STAGE}/${CUMOD_PC_KEY}/cumod.pc")
    configure_file("${CUMOD_PC_IN}" "${CUMOD_PC_OUT}" @ONLY)
    file(INSTALL DESTINATION "${CUMOD_PC_DEST}" TYPE FILE FILES "${CUMOD_PC_OUT}")
  ]] COMPONENT libcumod-dev)
endfunction()
