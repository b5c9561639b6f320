# Manual pages, written at build time by the programs themselves (`--print-man`, common/man_page.h)
# from the definitions --help and --print-config use, and installed with their programs:
# hetero-commd(8) and hetero-commd.toml(5) in component `daemon`, hcctl(1) and hc-perf(1) in
# `tools`. tests/packaging/man_pages.sh checks the installed pages against the built daemon.
include(GNUInstallDirs)

# A build that cannot run what it builds (cross-compiling without an emulator) has no pages.
if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "Manual pages: off (cross-compiling without CMAKE_CROSSCOMPILING_EMULATOR)")
  return()
endif()

set(_hc_man_dir ${CMAKE_BINARY_DIR}/man)
set(_hc_man_pages "")

# hc_man_page(TARGET PAGE SECTION COMPONENT [ARGS...]): run TARGET with ARGS at build time into
# <build>/man/PAGE.SECTION, and install it under man/manSECTION in COMPONENT.
function(hc_man_page target page section component)
  if(NOT TARGET ${target})
    return()
  endif()
  set(out ${_hc_man_dir}/${page}.${section})
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${out} -P ${PROJECT_SOURCE_DIR}/cmake/HcRunManPage.cmake
            ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:${target}> ${ARGN}
    DEPENDS ${target} ${PROJECT_SOURCE_DIR}/cmake/HcRunManPage.cmake
    COMMENT "Writing manual page ${page}(${section})"
    VERBATIM)
  install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
  set(_hc_man_pages ${_hc_man_pages} ${out} PARENT_SCOPE)
endfunction()

hc_man_page(hetero-commd hetero-commd 8 daemon --print-man 8)
hc_man_page(hetero-commd hetero-commd.toml 5 daemon --print-man 5)
hc_man_page(hcctl hcctl 1 tools --print-man)
hc_man_page(hc-perf hc-perf 1 tools --print-man)
if(_hc_man_pages)
  add_custom_target(hc_man_pages ALL DEPENDS ${_hc_man_pages})
endif()
