# Debian packages, one per install component (cmake/HcInstall.cmake), made by CPack:
#   hetero-commd        daemon   the daemon, units, sysusers.d/tmpfiles.d, sample config, pages
#   libhcclient1        runtime  libhcclient.so.1 (the package name follows the SONAME)
#   libhcclient-dev     dev      headers, libhcclient.so, CMake package, pkg-config file
#   hetero-comm-tools   tools    hcctl, hc-perf
#   hetero-comm-nccl    shim     libnccl.so.2, librccl.so.1 in <libdir>/hetero-comm (private)
#   python3-hetero-comm python   the hetero_comm package, for the python3-torch it was built with
# `scripts/package` builds them (it configures the build for /usr first) and runs lintian;
# tests/packaging/deb_packages.sh installs them into a throwaway root. What a package carries
# beyond `cmake --install` (maintainer scripts, copyright, changelog) is in packaging/deb/.
if(NOT TARGET hetero-commd OR NOT TARGET hcclient)
  return()
endif()
include(GNUInstallDirs)

set(HC_DEB_MAINTAINER "hetero-comm maintainers <maintainers@hetero-comm.invalid>" CACHE STRING
    "Maintainer field of the Debian packages (Name <address>)")
set(HC_DEB_RELEASE 1 CACHE STRING "Debian revision of the packages (the part after the '-')")
set(HC_DEB_VERSION ${PROJECT_VERSION}-${HC_DEB_RELEASE})
set(_hc_deb_src ${PROJECT_SOURCE_DIR}/packaging/deb)
set(_hc_deb_gen ${CMAKE_BINARY_DIR}/hc-deb)

# Packages install under /usr, where Debian's paths are: the multiarch libdir, python3's
# dist-packages, units under /lib/systemd. A build for another prefix packages nothing sensible.
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "Debian packages: configure with -DCMAKE_INSTALL_PREFIX=/usr to build them "
                 "(scripts/package does)")
endif()

# Components and their packages. The shim and the Python package come when their targets exist;
# the Python package only for Debian's torch, whose exact version it is pinned to.
set(_hc_deb_components daemon runtime dev)
if(TARGET hcctl OR TARGET hc-perf)
  list(APPEND _hc_deb_components tools)
endif()
if(TARGET hcnccl)
  list(APPEND _hc_deb_components shim)
endif()
if(TARGET hc_torch_ext)
  execute_process(COMMAND dpkg-query -W -f=\${Version} python3-torch
    OUTPUT_VARIABLE _hc_torch_version RESULT_VARIABLE _hc_rc ERROR_QUIET)
  if(_hc_rc EQUAL 0 AND _hc_torch_version)
    list(APPEND _hc_deb_components python)
  else()
    message(STATUS "Debian packages: no python3-hetero-comm (torch is not Debian's python3-torch)")
  endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hetero-comm)
set(CPACK_PACKAGE_VENDOR hetero-comm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${HC_DEB_MAINTAINER})
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_COMPONENTS_ALL ${_hc_deb_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
# CMAKE_INSTALL_PREFIX stays /usr during the package's install (the staging folder is DESTDIR),
# so the unit's ExecStart and the .pc file name the final paths, as HcInstall.cmake expects.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# Stripped: the daemon is 130 MB with its debug information and 7 MB without, and lintian reads
# every binary. The build tree keeps the unstripped ones; there are no -dbgsym packages
# (CPACK_DEBIAN_DEBUGINFO_PACKAGE), which would compress those 130 MB in every CI run.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${HC_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SOURCE hetero-comm)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# hc-perf, the shim and the extension need libhcclient.so.1 from this very build: dpkg-shlibdeps
# finds it here and the packages name libhcclient1 themselves (below).
get_target_property(_hc_client_dir hcclient BINARY_DIR)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_hc_client_dir})
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Manual pages go into a package compressed (gzip -9n), as Debian's policy asks.
set(CPACK_PRE_BUILD_SCRIPTS ${_hc_deb_src}/compress-man-pages.cmake)
set(_hc_same "libhcclient1 (= ${HC_DEB_VERSION})")

# hc_deb_package(COMPONENT NAME SECTION DEPENDS SUMMARY DESCRIPTION): the package of COMPONENT.
# DEPENDS is added to what dpkg-shlibdeps finds; DESCRIPTION is the extended description.
function(hc_deb_package component name section depends summary description)
  string(TOUPPER ${component} c)
  set(CPACK_DEBIAN_${c}_PACKAGE_NAME ${name} PARENT_SCOPE)
  set(CPACK_DEBIAN_${c}_PACKAGE_SECTION ${section} PARENT_SCOPE)
  set(CPACK_DEBIAN_${c}_PACKAGE_DEPENDS "${depends}" PARENT_SCOPE)
  set(CPACK_DEBIAN_${c}_DESCRIPTION "${summary}\n${description}" PARENT_SCOPE)
  # Debian's copyright and changelog in /usr/share/doc/<package>, for packages only: a plain
  # `cmake --install` (no --component) leaves them out (EXCLUDE_FROM_ALL).
  install(FILES ${_hc_deb_src}/copyright ${_hc_deb_gen}/changelog.Debian.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${name} COMPONENT ${component} EXCLUDE_FROM_ALL)
endfunction()

# The changelog lintian asks of every package, dated by SOURCE_DATE_EPOCH when that is set.
string(TIMESTAMP HC_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${_hc_deb_src}/changelog.in ${_hc_deb_gen}/changelog.Debian @ONLY)
execute_process(COMMAND gzip -9nf ${_hc_deb_gen}/changelog.Debian RESULT_VARIABLE _hc_rc)
if(NOT _hc_rc EQUAL 0)
  message(FATAL_ERROR "gzip failed on ${_hc_deb_gen}/changelog.Debian")
endif()

hc_deb_package(daemon hetero-commd net "passwd"
  "collective communication daemon for CUDA, ROCm and host ranks"
  "hetero-commd owns a node's NICs and the GPU memory training processes hand it,
and runs their collectives (allreduce, allgather, reduce-scatter, all-to-all,
send/recv...) across every rank of a job, whatever GPU vendor each rank runs
on. It serves gRPC health and the hetero_comm.v1 control service.

This package holds the daemon, its systemd socket and service (not enabled:
systemctl enable --now hetero-commd.socket starts it), the users and groups it
runs as, and a commented sample of /etc/hetero-comm/hetero-commd.toml.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "hetero-comm-tools")
set(HC_FULL_SYSUSERSDIR ${CMAKE_INSTALL_PREFIX}/${HC_SYSUSERS_DIR})
configure_file(${_hc_deb_src}/hetero-commd/postinst.in ${_hc_deb_gen}/hetero-commd/postinst
  @ONLY)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA ${_hc_deb_gen}/hetero-commd/postinst
  ${_hc_deb_src}/hetero-commd/prerm ${_hc_deb_src}/hetero-commd/postrm)

hc_deb_package(runtime libhcclient1 libs ""
  "client library of hetero-commd"
  "libhcclient connects a training process to the node's hetero-commd and submits
its collectives: communicators, buffers named by IPC handle, non-blocking
operations. Its C API is hetero_comm/hc.h.")
# shlibs names this package for programs linked against libhcclient.so.1; the trigger runs
# ldconfig once per dpkg run, as Debian's own library packages do.
file(WRITE ${_hc_deb_gen}/libhcclient1/shlibs "libhcclient 1 ${_hc_same}\n")
file(WRITE ${_hc_deb_gen}/libhcclient1/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${_hc_deb_gen}/libhcclient1/shlibs ${_hc_deb_gen}/libhcclient1/triggers)

hc_deb_package(dev libhcclient-dev libdevel "${_hc_same}"
  "client library of hetero-commd (development files)"
  "libhcclient connects a training process to the node's hetero-commd and submits
its collectives.

This package holds the headers (hetero_comm/hc.h, hetero_comm/hc.hpp), the
CMake package (find_package(HeteroComm), HeteroComm::hcclient) and the
pkg-config file hetero-comm.pc.")

hc_deb_package(tools hetero-comm-tools net "${_hc_same}"
  "command line tools for hetero-commd"
  "hcctl asks a node's hetero-commd for health, devices, communicators and the
flight recorder over gRPC. hc-perf measures collectives through the daemon, in
the output format of nccl-tests.")

if(TARGET hcnccl)
  set(HC_SHIM_FULL_DIR ${CMAKE_INSTALL_PREFIX}/${HC_SHIM_INSTALL_DIR})
  configure_file(${_hc_deb_src}/hetero-comm-nccl/README.Debian.in
    ${_hc_deb_gen}/hetero-comm-nccl/README.Debian @ONLY)
  install(FILES ${_hc_deb_gen}/hetero-comm-nccl/README.Debian
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/hetero-comm-nccl COMPONENT shim EXCLUDE_FROM_ALL)
  hc_deb_package(shim hetero-comm-nccl libs "${_hc_same}"
    "NCCL and RCCL libraries over hetero-commd"
    "libnccl.so.2 and librccl.so.1 implement the C API of NCCL and RCCL over
libhcclient, so programs built against NCCL or RCCL run their collectives
through the node's hetero-commd, and CUDA and ROCm ranks join one job.

They live in ${HC_SHIM_FULL_DIR}, never on the default
library path: a job opts in with LD_LIBRARY_PATH or LD_PRELOAD (see
hetero-comm-nccl(7)).")
endif()

if(TARGET hc_torch_ext)
  # The extension is built for one python3 (its suffix: .cpython-311-<triplet>.so) and this
  # torch's C++ ABI: it depends on both exactly.
  get_target_property(_hc_suffix hc_torch_ext SUFFIX)
  if(_hc_suffix MATCHES "cpython-3([0-9]+)")
    math(EXPR _hc_next "${CMAKE_MATCH_1} + 1")
    set(_hc_py_depends "python3 (>= 3.${CMAKE_MATCH_1}~), python3 (<< 3.${_hc_next}), ")
  endif()
  hc_deb_package(python python3-hetero-comm python
    "${_hc_py_depends}python3-torch (= ${_hc_torch_version}), ${_hc_same}"
    "PyTorch distributed backend over hetero-commd"
    "The hetero_comm package registers the torch.distributed backend hetero,
which runs the collectives of CPU tensors through the node's hetero-commd.
GPU jobs keep PyTorch's NCCL backend with the libraries of hetero-comm-nccl.

Built against python3-torch ${_hc_torch_version}, which it requires exactly.")
endif()

include(CPack)
