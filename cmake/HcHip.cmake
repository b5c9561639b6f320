# The HIP toolchain for the HIP device backend (daemon/device/hip), decided by HC_WITH_HIP:
#   AUTO  (the default) build the backend when the HIP headers are found and hipcc compiles a
#         one-line kernel for the first of HC_HIP_ARCHS, skip it otherwise; one status line says
#         which, and why;
#   ON    build it, and fail the configure when they are missing or cannot compile;
#   OFF   skip it.
# hipcc is looked for on PATH, then in $ROCM_PATH and /opt/rocm; finding it decides nothing, the
# probe kernel does (Debian's hipcc is a script that runs the HIP clang it was built with).
# The toolchain is used at build time only: hipcc compiles the reduction kernels into a
# code-object bundle, and hip_runtime_api.h provides types (-D__HIP_PLATFORM_AMD__). Nothing links
# libamdhip64: the daemon dlopens it at run time, so one binary runs on machines with or without
# ROCm. CMake's own HIP language is not used: on Debian's layout CMake 3.25 cannot find
# hip-lang (it looks under <rocm>/lib/cmake, Debian installs it under the multiarch directory).
#
# Sets HC_HIP_FOUND, HC_HIPCC (the compiler), HC_HIP_INCLUDE_DIR (hip/hip_runtime_api.h), and
# provides hc_hip_code_object(<output> <source> [DEPENDS ...] [INCLUDE_DIRECTORIES ...]) and
# hc_use_hip_headers(<target>).

include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/HcGpuProbe.cmake)

# gfx90a (MI200) and gfx940 (MI300 engineering parts). gfx942 (MI300X/A) needs hipcc from
# ROCm >= 5.7: Debian 12's HIP 5.2 compiles with clang-15, which rejects "gfx942", and its
# device libraries have no gfx942 ISA file.
set(HC_HIP_ARCHS "gfx90a;gfx940" CACHE STRING
    "AMD GPU targets of the HIP reduction kernels (hipcc --offload-arch; gfx942 needs ROCm >= 5.7)")

set(HC_HIP_FOUND FALSE)
hc_gpu_mode(HIP _hc_hip_mode)
if(_hc_hip_mode STREQUAL "OFF")
  hc_gpu_verdict(HIP "off (HC_WITH_HIP=${HC_WITH_HIP})")
  return()
endif()
set(_hc_hip_remedy "Install hipcc and the HIP headers (Debian: hipcc libamdhip64-dev)")

hc_gpu_forget_missing(HC_HIPCC)
hc_gpu_forget_missing(HC_HIP_INCLUDE_DIR /hip/hip_runtime_api.h)
find_program(HC_HIPCC hipcc
  HINTS ENV ROCM_PATH /opt/rocm
  PATH_SUFFIXES bin
  DOC "hipcc, for the HIP backend's kernels")
find_path(HC_HIP_INCLUDE_DIR hip/hip_runtime_api.h
  HINTS ENV ROCM_PATH /opt/rocm
  PATH_SUFFIXES include
  DOC "the directory holding hip/hip_runtime_api.h")
if(NOT HC_HIPCC)
  hc_gpu_unavailable(HIP ${_hc_hip_mode} hipcc
    "not found on PATH, in $ROCM_PATH or /opt/rocm" "${_hc_hip_remedy}")
  return()
endif()
if(NOT HC_HIP_INCLUDE_DIR)
  hc_gpu_unavailable(HIP ${_hc_hip_mode} hipcc
    "no HIP headers for ${HC_HIPCC} (hip/hip_runtime_api.h in $ROCM_PATH, /opt/rocm, /usr/include)"
    "${_hc_hip_remedy}")
  return()
endif()

foreach(_hc_arch IN LISTS HC_HIP_ARCHS)
  if(_hc_arch MATCHES "^gfx942")
    message(WARNING "HC_HIP_ARCHS has ${_hc_arch}: this needs hipcc from ROCm >= 5.7 (Debian 12's "
                    "clang-15 fails with \"invalid target ID\")")
  endif()
endforeach()

list(GET HC_HIP_ARCHS 0 _hc_first_arch)
hc_gpu_probe(HIP ${HC_HIPCC} probe.hip
  "#include <hip/hip_runtime.h>\n__global__ void hcProbe(float* p) { p[threadIdx.x] = 1.0f; }\n"
  _hc_hip_why -c --offload-arch=${_hc_first_arch})
if(_hc_hip_why)
  hc_gpu_unavailable(HIP ${_hc_hip_mode} hipcc "${_hc_hip_why}" "${_hc_hip_remedy}")
  return()
endif()

set(HC_HIP_FOUND TRUE)
hc_gpu_verdict(HIP
  "on (hipcc ${HC_HIPCC}, HIP headers in ${HC_HIP_INCLUDE_DIR}, archs ${HC_HIP_ARCHS})")

# Host code that includes the HIP headers for their types and signatures. Never links the runtime.
function(hc_use_hip_headers target)
  target_include_directories(${target} SYSTEM PRIVATE ${HC_HIP_INCLUDE_DIR})
  target_compile_definitions(${target} PRIVATE __HIP_PLATFORM_AMD__)
endfunction()

# Compiles <source> as HIP into a code-object bundle at <output>: one code object per
# HC_HIP_ARCHS entry. The flags keep the kernels' rounding equal to the host reduction's: no
# contraction into fused multiply-add (HIP's default contracts), no fast math, no flush of
# denormals. hipcc's dependency file tracks the headers; DEPENDS adds anything else.
function(hc_hip_code_object output source)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "DEPENDS;INCLUDE_DIRECTORIES")
  set(archs)
  foreach(arch ${HC_HIP_ARCHS})
    list(APPEND archs --offload-arch=${arch})
  endforeach()
  set(includes)
  foreach(dir ${ARG_INCLUDE_DIRECTORIES})
    list(APPEND includes -I${dir})
  endforeach()
  add_custom_command(OUTPUT ${output}
    COMMAND ${HC_HIPCC} -x hip --genco ${archs} -std=c++20 -O3 -ffp-contract=off -fno-fast-math
            -fno-gpu-flush-denormals-to-zero ${includes} -MD -MF ${output}.d -o ${output} ${source}
    DEPENDS ${source} ${ARG_DEPENDS}
    DEPFILE ${output}.d
    COMMENT "hipcc: HIP kernels ${source} -> code-object bundle (archs ${HC_HIP_ARCHS})"
    VERBATIM)
endfunction()
