# What HcCuda.cmake and HcHip.cmake share: reading HC_WITH_<BACKEND> (AUTO/ON/OFF), the one
# verdict line each backend prints (and scripts/test reads back from hc-backends.txt), and the
# probe that decides AUTO by compiling a one-line kernel. A compiler that is found but cannot
# compile (a stale toolkit, a host compiler it rejects, a wrapper whose backend is gone) must
# skip the backend under AUTO, not break the build later.

include_guard(GLOBAL)

# hc_gpu_mode(<BACKEND> <out>): <out> is AUTO, ON or OFF. Any boolean CMake reads as one (YES, 1,
# FALSE...) counts; anything else fails, since if() would read a typo such as "ATUO" as OFF.
function(hc_gpu_mode backend out)
  string(TOUPPER "${HC_WITH_${backend}}" mode)
  if(mode STREQUAL "AUTO")
    set(${out} AUTO PARENT_SCOPE)
  elseif(mode MATCHES "^(ON|YES|Y|TRUE|[1-9][0-9]*)$")
    set(${out} ON PARENT_SCOPE)
  elseif(mode MATCHES "^(OFF|NO|N|FALSE|0|)$")
    set(${out} OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "HC_WITH_${backend}=${HC_WITH_${backend}}: use AUTO, ON or OFF")
  endif()
endfunction()

# hc_gpu_verdict(<BACKEND> <text>): prints the backend's one line and records it for the
# top-level CMakeLists, which writes every backend's line to hc-backends.txt.
function(hc_gpu_verdict backend text)
  message(STATUS "${backend} backend: ${text}")
  set_property(GLOBAL PROPERTY HC_${backend}_VERDICT "${backend} backend: ${text}")
endfunction()

# hc_gpu_unavailable(<BACKEND> <mode> <compiler> <why> <remedy>): the compiler cannot serve.
# Under ON the configure stops, naming the remedy; under AUTO the backend is off, saying why.
# The caller returns from its module afterwards.
function(hc_gpu_unavailable backend mode compiler why remedy)
  if(mode STREQUAL "ON")
    message(FATAL_ERROR "HC_WITH_${backend}=ON but there is no working ${compiler}: ${why}\n"
                        "${remedy}, or configure with -DHC_WITH_${backend}=AUTO (build without "
                        "it when it cannot compile) or -DHC_WITH_${backend}=OFF.")
  endif()
  hc_gpu_verdict(${backend} "off (no working ${compiler}: ${why})")
endfunction()

# hc_gpu_forget_missing(<cache var> [<file under it>]): a path found by an earlier configure
# that is gone now (the toolkit was removed or hidden) is searched for again, instead of the
# cache claiming a compiler that is not there.
function(hc_gpu_forget_missing var)
  if(${var} AND NOT EXISTS "${${var}}${ARGN}")
    unset(${var} CACHE)
  endif()
endfunction()

# hc_gpu_probe(<BACKEND> <compiler> <source name> <source text> <out why> <flags>...): compiles
# the source with `<compiler> <flags> -o probe.o <source>`. <out why> is empty on success, else
# one line quoting the compiler. A success is remembered per compiler (its real path and
# modification time), so a reconfigure does not pay the probe again, but a new or replaced
# compiler is probed.
function(hc_gpu_probe backend compiler source text out)
  file(REAL_PATH "${compiler}" real)
  file(TIMESTAMP "${real}" stamp "%Y-%m-%dT%H:%M:%S" UTC)
  set(identity "${real} ${stamp}")
  if(HC_${backend}_PROBED STREQUAL identity)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  string(TOLOWER ${backend} name)
  string(REPLACE ";" " " flags "${ARGN}")
  set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/hc_${name}_probe)
  file(WRITE ${dir}/${source} "${text}")
  execute_process(COMMAND ${compiler} ${ARGN} -o probe.o ${source}
    WORKING_DIRECTORY ${dir}
    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log
    TIMEOUT 120)
  if(rc EQUAL 0)
    set(HC_${backend}_PROBED "${identity}" CACHE INTERNAL "the compiler that compiled the probe")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  unset(HC_${backend}_PROBED CACHE)
  file(WRITE ${dir}/probe.log "${compiler} ${flags} -o probe.o ${source}\nexit: ${rc}\n${log}")
  # One line for the verdict; the whole output stays in probe.log.
  string(STRIP "${log}" log)
  string(REGEX REPLACE "[\r\n]+" " | " log "${log}")
  if(log STREQUAL "" AND rc MATCHES "^[0-9]+$")
    set(log "exit status ${rc}")
  elseif(log STREQUAL "")
    set(log "${rc}")  # execute_process's words: it did not run, or ran past the timeout
  endif()
  string(LENGTH "${log}" length)
  if(length GREATER 300)
    string(SUBSTRING "${log}" 0 300 log)
    string(APPEND log "... (all of it in ${dir}/probe.log)")
  endif()
  set(${out} "${compiler} cannot compile a one-line kernel (${flags}): ${log}" PARENT_SCOPE)
endfunction()
