# Run by `cmake --install` (install(CODE) in daemon/CMakeLists.txt): makes
# the systemd units with the prefix the install really uses, so
# `cmake --install build --prefix /opt/x` gives units that name
# /opt/x/sbin/cumodd. Inputs: CUMOD_SRC (daemon/systemd), CUMOD_PREFIX,
# CUMOD_DESTDIR, CUMOD_UNITDIR, CUMOD_SYSUSERSDIR, CUMOD_SYSCONF (the
# configuration folder, absolute), CUMOD_DOCDIR.
file(READ "${CUMOD_SRC}/hardening.conf" CUMOD_HARDENING)
string(STRIP "${CUMOD_HARDENING}" CUMOD_HARDENING)
set(CUMOD_SBINDIR "${CUMOD_PREFIX}/sbin")
set(CUMOD_SYSCONFDIR "${CUMOD_SYSCONF}")
foreach(unit cumodd.service cumodd@.service)
  configure_file("${CUMOD_SRC}/${unit}.in" "${CUMOD_DESTDIR}${CUMOD_UNITDIR}/${unit}" @ONLY)
  message(STATUS "Installing: ${CUMOD_DESTDIR}${CUMOD_UNITDIR}/${unit}")
endforeach()
configure_file("${CUMOD_SRC}/cumod.sysusers" "${CUMOD_DESTDIR}${CUMOD_SYSUSERSDIR}/cumod.conf" COPYONLY)
message(STATUS "Installing: ${CUMOD_DESTDIR}${CUMOD_SYSUSERSDIR}/cumod.conf")
# The configuration file is the operator's once installed: never replaced.
set(_conf "${CUMOD_DESTDIR}${CUMOD_SYSCONF}/cumod/cumodd.conf")
if(NOT EXISTS "${_conf}")
  configure_file("${CUMOD_SRC}/cumodd.conf" "${_conf}" COPYONLY)
  message(STATUS "Installing: ${_conf}")
else()
  message(STATUS "Keeping: ${_conf} (the operator's)")
endif()
