# shellcheck shell=bash
# Sourced by scripts/test and scripts/demo: which GPU backends they ask CMake for, and how they
# print the configure's verdict. Outside CI each backend is AUTO: built when its compiler compiles
# a one-line kernel, otherwise off, with one line saying why, so a machine without nvcc or hipcc
# still builds and tests everything else. CI (CI=true, or HC_REQUIRE_GPU_BUILD=1, which .ci/run
# sets) requires both: GPU code that stops compiling fails the run instead of dropping out of it.

# The arguments that go before and after the caller's CMAKE_ARGS (CMake keeps the last -D of a
# name): CMAKE_ARGS may turn AUTO into ON or OFF, but cannot turn CI's ON off.
# shellcheck disable=SC2034  # read by the scripts that source this file
if [ "${CI:-}" = true ] || [ "${HC_REQUIRE_GPU_BUILD:-0}" = 1 ]; then
  gpu_args_first=()
  gpu_args_last=(-DHC_WITH_CUDA=ON -DHC_WITH_HIP=ON)
else
  gpu_args_first=(-DHC_WITH_CUDA=AUTO -DHC_WITH_HIP=AUTO)
  gpu_args_last=()
fi

# print_gpu_backends BUILD_DIR: one line a backend, "on (...)" or "off (why)", as the configure
# wrote them (cmake/HcGpuProbe.cmake).
print_gpu_backends() {
  sed 's/^/== /' "$1/hc-backends.txt" 2>/dev/null || true
}
