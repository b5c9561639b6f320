#!/usr/bin/env bash
# A machine without GPU toolkits configures. In a private mount namespace where /usr/local/cuda
# (and /opt/rocm) is an empty tmpfs and every nvcc and hipcc on PATH is masked:
#   - the default (AUTO) configure from scratch succeeds and reports both backends off, and
#     HC_WITH_CUDA=ON or HC_WITH_HIP=ON fails it, saying which compiler is missing;
#   - a tree configured where the toolkits work, reconfigured there, turns both off rather than
#     trusting the compilers its cache remembers;
#   - compilers that are found but fail (a broken toolkit) are off under AUTO, quoting them, and
#     fail the configure under ON.
# Outside the namespace, the default configure turns on every backend the build under test has
# on: AUTO is not more timid than ON.
# Configure only: building takes many minutes on 2 cores.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
src=$1
work=$2
cmake=$3
build_backends=$4  # the build's hc-backends.txt

need_tool unshare
unshare -m true 2>/dev/null || skip "no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)"
rm -rf "$work"
mkdir -p "$work"
# Only the configure matters: the tests, benchmarks and the PyTorch backend stay out of it.
common=(-G Ninja -DHC_BUILD_TESTS=OFF -DHC_BUILD_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)
# A toolkit that is there but broken: nvcc and hipcc that fail, headers beside them.
broken=$work/broken-toolkit
mkdir -p "$broken/bin" "$broken/include/hip"
printf '#!/bin/sh\necho "$0: this toolkit is broken" >&2\nexit 1\n' >"$broken/bin/nvcc"
cp "$broken/bin/nvcc" "$broken/bin/hipcc"
chmod +x "$broken/bin/nvcc" "$broken/bin/hipcc"
: >"$broken/include/cuda.h"
: >"$broken/include/hip/hip_runtime_api.h"

# configure_masked LOG KIND ARGS...: runs `cmake ARGS` in a namespace without the toolkits:
# /usr/local/cuda and /opt/rocm (where present) are empty, every nvcc and hipcc on PATH is
# /dev/null (not executable, so not found), CUDA_HOME, CUDA_PATH and ROCM_PATH are unset.
# KIND broken: $broken comes first on PATH and is ROCM_PATH.
configure_masked() {
  local log=$1 kind=$2
  shift 2
  unshare -m bash -s -- "$cmake" "$kind" "$broken" "$@" <<'SH' >"$log" 2>&1
set -eu
cmake=$1 kind=$2 broken=$3
shift 3
# /usr/local/cuda is often a link to /usr/local/cuda-<version>: mount follows it and hides that.
for dir in /usr/local/cuda /opt/rocm; do
  if [ -d "$dir" ]; then mount -t tmpfs none "$dir"; fi
done
# Wrappers elsewhere on PATH (/usr/local/bin/nvcc, /usr/bin/hipcc) go too.
for f in $(type -ap nvcc hipcc); do mount --bind /dev/null "$f"; done
unset CUDA_HOME CUDA_PATH ROCM_PATH
if [ "$kind" = broken ]; then export PATH=$broken/bin:$PATH ROCM_PATH=$broken; fi
echo "nvcc and hipcc on PATH: $(type -ap nvcc hipcc | tr '\n' ' ')"
exec "$cmake" "$@"
SH
}

# expect_line DIR PATTERN: DIR's hc-backends.txt has a line matching PATTERN.
expect_line() {
  grep -q "$2" "$1/hc-backends.txt" ||
    fail "$1: no backend line matches '$2':$(printf '\n'; cat "$1/hc-backends.txt")"
}
# expect_failure LOG PATTERN: the configure failed (the caller checked) and said PATTERN.
# CMake wraps its error text: the log is read as one line.
expect_failure() {
  tr -s '\n ' '  ' <"$1" | grep -q "$2" ||
    fail "the configure failed without saying '$2':$(printf '\n'; tail -20 "$1")"
}

# The two configures from scratch run side by side; the rest are quick reconfigures.
"$cmake" -S "$src" -B "$work/here" "${common[@]}" >"$work/here.log" 2>&1 &
here_pid=$!
none_ok=1
configure_masked "$work/none.log" none -S "$src" -B "$work/none" "${common[@]}" || none_ok=0
wait "$here_pid" ||
  fail "the default configure with the toolkits failed:$(printf '\n'; tail -20 "$work/here.log")"
[ "$none_ok" = 1 ] ||
  fail "configure without GPU toolkits failed:$(printf '\n'; tail -20 "$work/none.log")"

# No toolkits: both off, each saying what is missing.
expect_line "$work/none" '^CUDA backend: off (no working nvcc: not found'
expect_line "$work/none" '^HIP backend: off (no working hipcc: not found'
echo "no toolkits:"
sed 's/^/  /' "$work/none/hc-backends.txt"

# With the toolkits: every backend the build under test has on, AUTO turns on too.
for backend in CUDA HIP; do
  if grep -q "^$backend backend: on" "$build_backends"; then
    expect_line "$work/here" "^$backend backend: on"
  fi
done
echo "with the toolkits (the build under test: $(cut -d' ' -f1,3 "$build_backends" | tr '\n' ' ')):"
sed 's/^/  /' "$work/here/hc-backends.txt"

# The toolkits gone after a configure that found them: the reconfigure notices.
configure_masked "$work/here-masked.log" none -S "$src" -B "$work/here" ||
  fail "reconfigure without GPU toolkits failed:$(printf '\n'; tail -20 "$work/here-masked.log")"
expect_line "$work/here" '^CUDA backend: off (no working nvcc'
expect_line "$work/here" '^HIP backend: off (no working hipcc'

# ON requires the compiler.
if configure_masked "$work/none-cuda-on.log" none -S "$src" -B "$work/none" -DHC_WITH_CUDA=ON; then
  fail "HC_WITH_CUDA=ON configured without nvcc"
fi
expect_failure "$work/none-cuda-on.log" 'HC_WITH_CUDA=ON but there is no working nvcc: not found'
if configure_masked "$work/none-hip-on.log" none -S "$src" -B "$work/none" -DHC_WITH_CUDA=AUTO \
  -DHC_WITH_HIP=ON; then
  fail "HC_WITH_HIP=ON configured without hipcc"
fi
expect_failure "$work/none-hip-on.log" 'HC_WITH_HIP=ON but there is no working hipcc: not found'

# Compilers that are there but fail: off under AUTO, quoting them; ON fails.
configure_masked "$work/broken.log" broken -S "$src" -B "$work/none" -DHC_WITH_CUDA=AUTO \
  -DHC_WITH_HIP=AUTO ||
  fail "AUTO with broken compilers failed the configure:$(printf '\n'; tail -20 "$work/broken.log")"
expect_line "$work/none" '^CUDA backend: off (no working nvcc: .*cannot compile a one-line kernel.*this toolkit is broken'
expect_line "$work/none" '^HIP backend: off (no working hipcc: .*cannot compile a one-line kernel.*this toolkit is broken'
if configure_masked "$work/broken-on.log" broken -S "$src" -B "$work/none" -DHC_WITH_CUDA=ON; then
  fail "HC_WITH_CUDA=ON with a broken nvcc configured"
fi
expect_failure "$work/broken-on.log" 'HC_WITH_CUDA=ON but there is no working nvcc: .*cannot compile a one-line kernel'
echo "ON without a compiler, or with a broken one, fails the configure; AUTO turns it off"
