# The CUDA toolkit for the CUDA device backend (daemon/device/cuda), decided by HC_WITH_CUDA:
#   AUTO  build the backend when nvcc is found and compiles a one-line kernel, skip it otherwise
#         (one status line says why);
#   ON    build it, and fail the configure when nvcc is missing or cannot compile;
#   OFF   skip it.
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

# sm_80 and sm_90 cubins, plus compute_90 PTX that newer GPUs JIT-compile. CUDA 13 accepts sm_75
# and newer only.
set(HC_CUDA_ARCHS 80 90 CACHE STRING "GPU architectures of the CUDA kernels (cubins; PTX for the last)")

set(HC_CUDA_FOUND FALSE)
string(TOUPPER "${HC_WITH_CUDA}" _hc_with_cuda)
if(_hc_with_cuda STREQUAL "AUTO")
  set(_hc_cuda_required FALSE)
elseif(HC_WITH_CUDA)
  set(_hc_cuda_required TRUE)
else()
  set(_hc_verdict "CUDA backend: off (HC_WITH_CUDA=${HC_WITH_CUDA})")
  message(STATUS "${_hc_verdict}")
  set_property(GLOBAL PROPERTY HC_CUDA_VERDICT "${_hc_verdict}")
  return()
endif()

find_program(HC_NVCC nvcc
  HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
  PATH_SUFFIXES bin
  DOC "nvcc, for the CUDA backend's kernels")
if(HC_NVCC)
  get_filename_component(_hc_cuda_root "${HC_NVCC}" DIRECTORY)
  get_filename_component(_hc_cuda_root "${_hc_cuda_root}" DIRECTORY)
  # /usr/local/bin/nvcc may be a wrapper script: also look where the toolkit usually lives.
  find_path(HC_CUDA_INCLUDE_DIR cuda.h
    HINTS "${_hc_cuda_root}/include" ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
    PATH_SUFFIXES include
    NO_DEFAULT_PATH)
endif()

if(NOT HC_NVCC OR NOT HC_CUDA_INCLUDE_DIR)
  set(_hc_cuda_why "nvcc or cuda.h not found (looked on PATH, in $CUDA_HOME and /usr/local/cuda)")
  if(_hc_cuda_required)
    message(FATAL_ERROR "HC_WITH_CUDA=ON but ${_hc_cuda_why}; install the CUDA toolkit or "
                        "configure with -DHC_WITH_CUDA=OFF")
  endif()
  set(_hc_verdict "CUDA backend: skipped (${_hc_cuda_why})")
  message(STATUS "${_hc_verdict}")
  set_property(GLOBAL PROPERTY HC_CUDA_VERDICT "${_hc_verdict}")
  return()
endif()

# Found is not enough: a toolkit that cannot compile for these archs (a stale nvcc, a host
# compiler it rejects) must not break the build. A one-line kernel decides, once per nvcc.
if(NOT HC_CUDA_PROBED_NVCC STREQUAL HC_NVCC)
  set(_hc_probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/hc_cuda_probe)
  file(WRITE ${_hc_probe_dir}/probe.cu "__global__ void hcProbe(float* p) { p[threadIdx.x] = 1.0f; }\n")
  list(GET HC_CUDA_ARCHS 0 _hc_first_arch)
  execute_process(
    COMMAND ${HC_NVCC} -c -gencode arch=compute_${_hc_first_arch},code=sm_${_hc_first_arch}
            -o ${_hc_probe_dir}/probe.o ${_hc_probe_dir}/probe.cu
    RESULT_VARIABLE _hc_probe_rc OUTPUT_VARIABLE _hc_probe_out ERROR_VARIABLE _hc_probe_out
    TIMEOUT 120)
  if(_hc_probe_rc EQUAL 0)
    set(HC_CUDA_PROBED_NVCC "${HC_NVCC}" CACHE INTERNAL "the nvcc that compiled the probe kernel")
  else()
    string(STRIP "${_hc_probe_out}" _hc_probe_out)
    set(_hc_cuda_why "${HC_NVCC} cannot compile a one-line kernel for sm_${_hc_first_arch}: ${_hc_probe_out}")
    if(_hc_cuda_required)
      message(FATAL_ERROR "HC_WITH_CUDA=ON but ${_hc_cuda_why}")
    endif()
    set(_hc_verdict "CUDA backend: skipped (${_hc_cuda_why})")
    message(STATUS "${_hc_verdict}")
    set_property(GLOBAL PROPERTY HC_CUDA_VERDICT "${_hc_verdict}")
    return()
  endif()
endif()

set(HC_CUDA_FOUND TRUE)
set_property(GLOBAL PROPERTY HC_CUDA_FOUND TRUE)
string(CONCAT _hc_verdict "CUDA backend: on (nvcc ${HC_NVCC}, cuda.h in ${HC_CUDA_INCLUDE_DIR}, "
               "archs ${HC_CUDA_ARCHS})")
message(STATUS "${_hc_verdict}")
set_property(GLOBAL PROPERTY HC_CUDA_VERDICT "${_hc_verdict}")

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
