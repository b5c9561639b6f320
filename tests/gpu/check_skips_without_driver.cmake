# cmake -DPROBE=<hc_gpu_probe> -P check_skips_without_driver.cmake
#
# Runs the whole probe where no CUDA driver (or no GPU) is: env and the POSIX primitives pass,
# every CUDA primitive is a SKIP that says why (never a FAIL), the probe exits 0, and all of it
# within 60 s. Where CUDA works the probe runs for real and this check does not apply: it says
# "a CUDA driver is present", which the test takes as its skip.
if(NOT PROBE)
  message(FATAL_ERROR "-DPROBE=<path of hc_gpu_probe> is required")
endif()

string(TIMESTAMP started "%s" UTC)
execute_process(COMMAND ${PROBE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(TIMESTAMP ended "%s" UTC)
math(EXPR seconds "${ended} - ${started}")
message("hc_gpu_probe (exit ${rc}, ${seconds} s):\n${out}${err}")

# The verdict of primitive `name` in the output, or "none".
function(verdict_of name out_var)
  string(REGEX MATCH "(^|\n)(PASS|FAIL|SKIP) ${name}( [^\n]*)?(\n|$)" line "${out}")
  if(line)
    set(${out_var} "${CMAKE_MATCH_2}" PARENT_SCOPE)
    set(${out_var}_line "${CMAKE_MATCH_0}" PARENT_SCOPE)
  else()
    set(${out_var} none PARENT_SCOPE)
    set(${out_var}_line "" PARENT_SCOPE)
  endif()
endfunction()

if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "hc_gpu_probe did not end within 60 s: ${rc}")
endif()
verdict_of(env env)
if(env STREQUAL "PASS" AND NOT env_line MATCHES "cuda=SKIP")
  message("a CUDA driver is present: this check is for machines without one")
  return()
endif()

set(problems "")
foreach(name env memfd_seals scm_rights shared_futex)
  verdict_of(${name} v)
  if(NOT v STREQUAL "PASS")
    string(APPEND problems "\n  ${name}: ${v}, expected PASS")
  endif()
endforeach()
foreach(name cuda_ipc_legacy cuda_vmm_fd cuda_stream_wait_value)
  verdict_of(${name} v)
  if(NOT v STREQUAL "SKIP")
    string(APPEND problems "\n  ${name}: ${v}, expected SKIP")
  elseif(NOT v_line MATCHES "SKIP ${name} \\(no CUDA (driver|device): [^\n]+\\)")
    string(APPEND problems "\n  ${name}: its SKIP does not say why: ${v_line}")
  endif()
endforeach()
if(NOT rc EQUAL 0)
  string(APPEND problems "\n  exit ${rc}, expected 0")
endif()
if(seconds GREATER 60)
  string(APPEND problems "\n  took ${seconds} s, more than 60")
endif()
if(problems)
  message(FATAL_ERROR "hc_gpu_probe without a CUDA driver:${problems}")
endif()
