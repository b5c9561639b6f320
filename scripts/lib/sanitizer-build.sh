# shellcheck shell=bash
# Sourced by scripts/asan-build and scripts/tsan-build: the clang 14 sanitizer builds they share.
# GPU backends, the PyTorch backend and the benchmarks are off. Optimized with -O1 and line tables
# only: enough for symbolized reports, and each builds its tests in a few minutes on 2 cores.

# sanitizer_build SCRIPT DIR CMAKE_ARG... -- TARGET...: configures DIR (once, with the CMAKE_ARGs
# after the shared ones) and builds the TARGETs. SCRIPT names the caller in its messages.
sanitizer_build() {
  local script=$1 dir=$2
  shift 2
  local configure_args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    configure_args+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  for tool in clang-14 clang++-14; do
    command -v "$tool" >/dev/null ||
      { echo "$script: $tool is missing (scripts/install-deps installs it)" >&2; return 1; }
  done
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    local flags="-O1 -gline-tables-only"
    cmake -S . -B "$dir" -G Ninja \
      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
      -DHC_WITH_CUDA=OFF -DHC_WITH_HIP=OFF -DHC_BUILD_BENCH=OFF \
      -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON "${configure_args[@]}"
  fi
  cmake --build "$dir" -j "$(nproc)" --target "$@"
}
