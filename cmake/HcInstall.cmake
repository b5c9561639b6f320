# `cmake --install`: the daemon and tools, libhcclient with its headers, the systemd units with
# sysusers.d/tmpfiles.d, the sample configuration, and what programs built against the client
# library use: a CMake package (find_package(HeteroComm) -> HeteroComm::hcclient) and
# hetero-comm.pc. tests/packaging/ installs into a staging prefix and checks all of it.
#
# Components: `daemon` (hetero-commd, units, sample config, hetero-commd(8) and
# hetero-commd.toml(5)), `tools` (hcctl, hc-perf and their pages), `runtime`
# (libhcclient.so.1), `dev` (headers, libhcclient.so, CMake package, pkg-config file); shim/
# adds `shim` (libnccl.so.2 and librccl.so.1 in a private folder) and python/ adds `python`.
# cmake/HcPackaging.cmake makes one Debian package of each.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# systemd reads units, sysusers.d and tmpfiles.d from <prefix>/lib, never from a multiarch
# libdir, so these are not CMAKE_INSTALL_LIBDIR. `pkg-config --variable=systemdsystemunitdir
# systemd` says /lib/systemd/system on Debian 12 (merged /usr: the same as /usr/lib/...);
# relative to the prefix, as here, that is lib/systemd/system. Packagers may override.
set(HC_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where the systemd units go, relative to the install prefix")
set(HC_SYSUSERS_DIR "lib/sysusers.d" CACHE STRING
    "Where sysusers.d/hetero-comm.conf goes, relative to the install prefix")
set(HC_TMPFILES_DIR "lib/tmpfiles.d" CACHE STRING
    "Where tmpfiles.d/hetero-comm.conf goes, relative to the install prefix")
set(HC_CMAKE_PACKAGE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/HeteroComm")

# The daemon goes to sbin: it is started by systemd or an administrator, not by users, as the
# Debian policy asks of system daemons. Users' tools go to bin.
if(TARGET hetero-commd)
  install(TARGETS hetero-commd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT daemon)
endif()
foreach(tool hcctl hc-perf)
  if(TARGET ${tool})
    # hc-perf links libhcclient: find it beside bin/ under any prefix, not only in /usr/lib.
    set_property(TARGET ${tool} PROPERTY INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endforeach()

if(TARGET hcclient)
  # libhcclient.so.<version>, the libhcclient.so.1 soname link (runtime) and the libhcclient.so
  # link the linker looks for (dev).
  install(TARGETS hcclient EXPORT HeteroCommTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/hetero_comm
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
    FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
  install(EXPORT HeteroCommTargets NAMESPACE HeteroComm::
    DESTINATION ${HC_CMAKE_PACKAGE_DIR} COMPONENT dev)

  # The client's dependencies are all private (libc, threads), so the package config needs no
  # find_dependency() and programs that use it never see gRPC, UCX or spdlog.
  set(_hc_config_in ${CMAKE_CURRENT_BINARY_DIR}/hc-install/HeteroCommConfig.cmake.in)
  file(WRITE ${_hc_config_in} [=[
# HeteroComm: the hetero-comm client library, libhcclient (C API hetero_comm/hc.h).
#   find_package(HeteroComm CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE HeteroComm::hcclient)
@PACKAGE_INIT@
include("${CMAKE_CURRENT_LIST_DIR}/HeteroCommTargets.cmake")
check_required_components(HeteroComm)
]=])
  configure_package_config_file(${_hc_config_in}
    ${CMAKE_CURRENT_BINARY_DIR}/hc-install/HeteroCommConfig.cmake
    INSTALL_DESTINATION ${HC_CMAKE_PACKAGE_DIR})
  # 0.x: a minor release may still change the API, so only the same minor version matches.
  write_basic_package_version_file(
    ${CMAKE_CURRENT_BINARY_DIR}/hc-install/HeteroCommConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hc-install/HeteroCommConfig.cmake
                ${CMAKE_CURRENT_BINARY_DIR}/hc-install/HeteroCommConfigVersion.cmake
    DESTINATION ${HC_CMAKE_PACKAGE_DIR} COMPONENT dev)
endif()

# Files that name absolute installed paths (the unit's ExecStart, the .pc file's libdir) are
# written at install time, from the prefix `cmake --install --prefix` was given, not the one
# configured: a staging install then names its own files. DESTDIR is not part of the prefix, so
# a package built with DESTDIR=... names the final /usr paths, as it must.
set(_hc_gen ${CMAKE_CURRENT_BINARY_DIR}/hc-install)
file(CONFIGURE OUTPUT ${_hc_gen}/configure-at-install.cmake @ONLY CONTENT [=[
# Runs inside `cmake --install`: configures ${HC_TEMPLATE} into ${HC_OUTPUT} with the paths of
# this installation. A relative GNUInstallDirs value hangs off the prefix; an absolute one stays.
set(HC_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(PROJECT_VERSION "@PROJECT_VERSION@")
foreach(pair "SBINDIR=@CMAKE_INSTALL_SBINDIR@" "LIBDIR=@CMAKE_INSTALL_LIBDIR@"
             "INCLUDEDIR=@CMAKE_INSTALL_INCLUDEDIR@" "DOCDIR=@CMAKE_INSTALL_DOCDIR@")
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 kind)
  list(GET pair 1 dir)
  if(IS_ABSOLUTE "${dir}")
    set(HC_FULL_${kind} "${dir}")
    set(HC_PC_${kind} "${dir}")
  else()
    set(HC_FULL_${kind} "${HC_PREFIX}/${dir}")
    set(HC_PC_${kind} "\${prefix}/${dir}")  # pkg-config's own variable, resolved by pkg-config
  endif()
endforeach()
configure_file("${HC_TEMPLATE}" "${HC_OUTPUT}" @ONLY)
]=])
# The layout as installed, for tests/packaging (relative to the prefix unless absolute).
file(CONFIGURE OUTPUT ${_hc_gen}/install-dirs.txt @ONLY CONTENT [=[
SBINDIR=@CMAKE_INSTALL_SBINDIR@
BINDIR=@CMAKE_INSTALL_BINDIR@
LIBDIR=@CMAKE_INSTALL_LIBDIR@
INCLUDEDIR=@CMAKE_INSTALL_INCLUDEDIR@
DOCDIR=@CMAKE_INSTALL_DOCDIR@
MANDIR=@CMAKE_INSTALL_MANDIR@
UNITDIR=@HC_SYSTEMD_UNIT_DIR@
SYSUSERSDIR=@HC_SYSUSERS_DIR@
TMPFILESDIR=@HC_TMPFILES_DIR@
SHIMDIR=@HC_SHIM_INSTALL_DIR@
]=])
# hc_install_configured(TEMPLATE OUTPUT_NAME DESTINATION COMPONENT): configure TEMPLATE at
# install time (see above) and install the result as DESTINATION/OUTPUT_NAME.
function(hc_install_configured template name destination component)
  set(out ${_hc_gen}/at-install/${name})
  install(CODE "set(HC_TEMPLATE \"${template}\")
    set(HC_OUTPUT \"${out}\")
    include(\"${_hc_gen}/configure-at-install.cmake\")" COMPONENT ${component})
  install(FILES ${out} DESTINATION ${destination} COMPONENT ${component})
endfunction()

if(TARGET hcclient)
  file(WRITE ${_hc_gen}/hetero-comm.pc.in [=[
prefix=@HC_PREFIX@
exec_prefix=${prefix}
libdir=@HC_PC_LIBDIR@
includedir=@HC_PC_INCLUDEDIR@

Name: hetero-comm
Description: hetero-comm client library (libhcclient): collectives through the node's hetero-commd
Version: @PROJECT_VERSION@
Libs: -L${libdir} -lhcclient
Cflags: -I${includedir}
]=])
  hc_install_configured(${_hc_gen}/hetero-comm.pc.in hetero-comm.pc
    ${CMAKE_INSTALL_LIBDIR}/pkgconfig dev)
endif()

# hetero-comm-nccl(7): the shim's private folder and how a job loads it (LD_LIBRARY_PATH,
# LD_PRELOAD), with the libdir of this installation.
if(TARGET hcnccl)
  hc_install_configured(${PROJECT_SOURCE_DIR}/shim/hetero-comm-nccl.7.in hetero-comm-nccl.7
    ${CMAKE_INSTALL_MANDIR}/man7 shim)
endif()

if(TARGET hetero-commd)
  hc_install_configured(${PROJECT_SOURCE_DIR}/systemd/hetero-commd.service.in
    hetero-commd.service ${HC_SYSTEMD_UNIT_DIR} daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/hetero-commd.socket
    DESTINATION ${HC_SYSTEMD_UNIT_DIR} COMPONENT daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/sysusers.d/hetero-comm.conf
    DESTINATION ${HC_SYSUSERS_DIR} COMPONENT daemon)
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/tmpfiles.d/hetero-comm.conf
    DESTINATION ${HC_TMPFILES_DIR} COMPONENT daemon)
  # The daemon reads /etc/hetero-comm/hetero-commd.toml and runs on its defaults without one, so
  # the commented sample is documentation: copying it into place is the administrator's choice
  # (and a file under /etc would be a conffile to keep in step with every release).
  install(FILES ${PROJECT_SOURCE_DIR}/systemd/hetero-commd.toml
    DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME hetero-commd.toml.sample COMPONENT daemon)
endif()
