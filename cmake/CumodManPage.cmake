# SPDX-License-Identifier: MIT
# cumod_man_page(<page> OUT <var>)
# A manual page of this folder as installed: the same text with the
# version in its .TH line (`.TH NAME S "" "cumod"` becomes `"cumod
# 0.1.0"`), written to the build folder; <var> is set to its path. The
# source keeps no version, so the project's version (CMakeLists.txt) is
# the only one; a change of the page configures again.
include_guard(GLOBAL)

# cumod_man_gzip(<target> <page path>): <page path>.gz, made at build
# time (gzip -9n: no name or time in the header), which is what is
# installed (Debian policy: manual pages are compressed; man reads them).
function(cumod_man_gzip target path)
  add_custom_command(OUTPUT ${path}.gz
    COMMAND gzip -9n -c ${path} > ${path}.gz
    DEPENDS ${path} COMMENT "gzip ${path}" VERBATIM)
  add_custom_target(${target} ALL DEPENDS ${path}.gz)
endfunction()

function(cumod_man_page page)
  cmake_parse_arguments(M "" "OUT" "" ${ARGN})
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${page})
  get_filename_component(name ${page} NAME)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/man/${name})
  file(READ ${src} text)
  string(REGEX REPLACE "^(\\.TH [^\n]*) \"cumod\"" "\\1 \"cumod ${PROJECT_VERSION}\""
         versioned "${text}")
  if(versioned STREQUAL text)
    message(FATAL_ERROR "${page}: its first line is not `.TH NAME SECTION DATE \"cumod\" ...`, "
      "where the build writes the version")
  endif()
  # Written only when it changes, so that nothing rebuilds for nothing.
  if(EXISTS ${out})
    file(READ ${out} old)
  endif()
  if(NOT old STREQUAL versioned)
    file(WRITE ${out} "${versioned}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  set(${M_OUT} ${out} PARENT_SCOPE)
endfunction()
