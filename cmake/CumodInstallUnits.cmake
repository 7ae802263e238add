# SPDX-License-Identifier: MIT
# Included by `cmake --install` (install(CODE) in daemon/CMakeLists.txt,
# component cumodd): makes the systemd units with the prefix the install
# really uses, so `cmake --install build --prefix /opt/x` gives units that
# name /opt/x/sbin/cumodd, and installs them, the sysusers.d file and the
# configuration file with file(INSTALL), so that install_manifest.txt (and
# a package) lists them. Inputs (set by the install code): CUMOD_UNITS_SRC
# (daemon/systemd), CUMOD_UNITS_STAGE (a folder of the build), and the
# folders CUMOD_UNITS_UNITDIR, CUMOD_UNITS_SYSUSERSDIR,
# CUMOD_UNITS_SYSCONFDIR, CUMOD_UNITS_SBINDIR, CUMOD_UNITS_DOCDIR (under
# the prefix unless absolute; the configuration folder of prefix /usr is
# /etc, as GNUInstallDirs says).
set(_cumod_p "${CMAKE_INSTALL_PREFIX}")
foreach(_cumod_k UNITDIR SYSUSERSDIR SYSCONFDIR SBINDIR DOCDIR)
  set(_cumod_d "${CUMOD_UNITS_${_cumod_k}}")
  if(NOT IS_ABSOLUTE "${_cumod_d}")
    if(_cumod_k STREQUAL "SYSCONFDIR" AND _cumod_p STREQUAL "/usr")
      set(_cumod_d "/${_cumod_d}")
    else()
      set(_cumod_d "${_cumod_p}/${_cumod_d}")
    endif()
  endif()
  set(_cumod_${_cumod_k} "${_cumod_d}")
endforeach()

# What the unit templates (daemon/systemd/*.service.in) name.
file(READ "${CUMOD_UNITS_SRC}/hardening.conf" CUMOD_HARDENING)
string(STRIP "${CUMOD_HARDENING}" CUMOD_HARDENING)
set(CUMOD_SBINDIR "${_cumod_SBINDIR}")
set(CUMOD_SYSCONFDIR "${_cumod_SYSCONFDIR}")
set(CUMOD_DOCDIR "${_cumod_DOCDIR}")
# Made in a folder of their own per destination: installs to several
# prefixes may run at once (the tests, cpack).
string(SHA1 _cumod_key "$ENV{DESTDIR}${_cumod_UNITDIR}")
set(_cumod_stage "${CUMOD_UNITS_STAGE}/${_cumod_key}")
foreach(_cumod_u cumodd.service cumodd@.service)
  configure_file("${CUMOD_UNITS_SRC}/${_cumod_u}.in" "${_cumod_stage}/${_cumod_u}" @ONLY)
endforeach()
file(INSTALL DESTINATION "${_cumod_UNITDIR}" TYPE FILE
  FILES "${_cumod_stage}/cumodd.service" "${_cumod_stage}/cumodd@.service")
file(INSTALL DESTINATION "${_cumod_SYSUSERSDIR}" TYPE FILE
  FILES "${CUMOD_UNITS_SRC}/cumod.sysusers" RENAME cumod.conf)

# The configuration file is the operator's once installed: never replaced
# (still listed in the manifest, as installed).
set(_cumod_conf "${_cumod_SYSCONFDIR}/cumod/cumodd.conf")
if(NOT EXISTS "$ENV{DESTDIR}${_cumod_conf}")
  file(INSTALL DESTINATION "${_cumod_SYSCONFDIR}/cumod" TYPE FILE
    FILES "${CUMOD_UNITS_SRC}/cumodd.conf")
else()
  message(STATUS "Keeping: $ENV{DESTDIR}${_cumod_conf} (the operator's)")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_cumod_conf}")
endif()
