# The CUDA toolkit for the CUDA device backend (daemon/device/cuda), decided by HC_WITH_CUDA:
#   AUTO  (the default) build the backend when nvcc compiles a one-line kernel for the first of
#         HC_CUDA_ARCHS, skip it otherwise; one status line says which, and why;
#   ON    build it, and fail the configure when nvcc is missing or cannot compile;
#   OFF   skip it.
# nvcc is looked for on PATH, then in $CUDA_HOME, $CUDA_PATH and /usr/local/cuda, where the
# toolkit installs without touching PATH; finding it decides nothing, the probe kernel does.
# The toolkit is used at build time only: nvcc compiles the reduction kernels into a fatbin, and
# cuda.h provides types. Nothing links libcudart or libcuda (not even the toolkit's stub): the
# daemon dlopens libcuda.so.1 at run time, so one binary runs on machines with or without a driver.
#
# Sets HC_CUDA_FOUND, HC_NVCC (the compiler), HC_CUDA_INCLUDE_DIR (cuda.h), and provides
# hc_cuda_fatbin(<output> <source> DEPENDS ...).

# Included by each folder that needs the decision (daemon/device/cuda, tests/gpu). The first
# include decides and records it in a global property; a later one only sets HC_CUDA_FOUND in its
# own scope, since a folder's variables do not reach its siblings.
get_property(_hc_cuda_decided GLOBAL PROPERTY HC_CUDA_FOUND SET)
if(_hc_cuda_decided)
  get_property(HC_CUDA_FOUND GLOBAL PROPERTY HC_CUDA_FOUND)
  return()
endif()
set_property(GLOBAL PROPERTY HC_CUDA_FOUND FALSE)
include(${CMAKE_CURRENT_LIST_DIR}/HcGpuProbe.cmake)

# sm_80 and sm_90 cubins, plus compute_90 PTX that newer GPUs JIT-compile. CUDA 13 accepts sm_75
# and newer only.
set(HC_CUDA_ARCHS 80 90 CACHE STRING "GPU architectures of the CUDA kernels (cubins; PTX for the last)")

set(HC_CUDA_FOUND FALSE)
hc_gpu_mode(CUDA _hc_cuda_mode)
if(_hc_cuda_mode STREQUAL "OFF")
  hc_gpu_verdict(CUDA "off (HC_WITH_CUDA=${HC_WITH_CUDA})")
  return()
endif()
set(_hc_cuda_remedy "Install the CUDA toolkit (nvcc on PATH, in $CUDA_HOME or /usr/local/cuda)")

hc_gpu_forget_missing(HC_NVCC)
hc_gpu_forget_missing(HC_CUDA_INCLUDE_DIR /cuda.h)
find_program(HC_NVCC nvcc
  HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
  PATH_SUFFIXES bin
  DOC "nvcc, for the CUDA backend's kernels")
if(NOT HC_NVCC)
  hc_gpu_unavailable(CUDA ${_hc_cuda_mode} nvcc
    "not found on PATH, in $CUDA_HOME, $CUDA_PATH or /usr/local/cuda" "${_hc_cuda_remedy}")
  return()
endif()
get_filename_component(_hc_cuda_root "${HC_NVCC}" DIRECTORY)
get_filename_component(_hc_cuda_root "${_hc_cuda_root}" DIRECTORY)
# /usr/local/bin/nvcc may be a wrapper script: also look where the toolkit usually lives.
find_path(HC_CUDA_INCLUDE_DIR cuda.h
  HINTS "${_hc_cuda_root}/include" ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
  PATH_SUFFIXES include
  NO_DEFAULT_PATH)
if(NOT HC_CUDA_INCLUDE_DIR)
  hc_gpu_unavailable(CUDA ${_hc_cuda_mode} nvcc
    "${HC_NVCC} has no cuda.h beside it (${_hc_cuda_root}/include, $CUDA_HOME, /usr/local/cuda)"
    "${_hc_cuda_remedy}")
  return()
endif()

list(GET HC_CUDA_ARCHS 0 _hc_first_arch)
hc_gpu_probe(CUDA ${HC_NVCC} probe.cu
  "__global__ void hcProbe(float* p) { p[threadIdx.x] = 1.0f; }\n" _hc_cuda_why
  -c -gencode arch=compute_${_hc_first_arch},code=sm_${_hc_first_arch})
if(_hc_cuda_why)
  hc_gpu_unavailable(CUDA ${_hc_cuda_mode} nvcc "${_hc_cuda_why}" "${_hc_cuda_remedy}")
  return()
endif()

set(HC_CUDA_FOUND TRUE)
set_property(GLOBAL PROPERTY HC_CUDA_FOUND TRUE)
hc_gpu_verdict(CUDA
  "on (nvcc ${HC_NVCC}, cuda.h in ${HC_CUDA_INCLUDE_DIR}, archs ${HC_CUDA_ARCHS})")

# Compiles <source> into a fatbin at <output>: one cubin per HC_CUDA_ARCHS entry and PTX for the
# last, so a newer GPU JIT-compiles it and an older driver that cannot still has the cubins.
# The flags keep the kernels' rounding equal to the host reduction's: no fused multiply-add,
# no flush-to-zero, IEEE division and square root.
function(hc_cuda_fatbin output source)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "DEPENDS;INCLUDE_DIRECTORIES")
  set(gencode)
  foreach(arch ${HC_CUDA_ARCHS})
    list(APPEND gencode -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  list(GET HC_CUDA_ARCHS -1 last)
  list(APPEND gencode -gencode arch=compute_${last},code=compute_${last})
  set(includes)
  foreach(dir ${ARG_INCLUDE_DIRECTORIES})
    list(APPEND includes -I${dir})
  endforeach()
  add_custom_command(OUTPUT ${output}
    COMMAND ${HC_NVCC} -fatbin -std=c++20 -O3 --fmad=false -ftz=false -prec-div=true
            -prec-sqrt=true ${gencode} ${includes} -o ${output} ${source}
    DEPENDS ${source} ${ARG_DEPENDS}
    COMMENT "nvcc: CUDA kernels ${source} -> fatbin (archs ${HC_CUDA_ARCHS})"
    VERBATIM)
endfunction()
