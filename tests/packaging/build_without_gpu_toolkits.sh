#!/usr/bin/env bash
# A machine without GPU toolkits configures: in a private mount namespace where /usr/local/cuda is
# an empty tmpfs and hipcc is masked, the default (AUTO) configure succeeds and reports both
# backends skipped. A toolkit that is found but cannot compile a kernel (an nvcc that fails) is
# skipped under AUTO, naming the compiler's words, and fails the configure under ON.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
src=$1
work=$2
cmake=${3:-cmake}

need_tool unshare
unshare -m true 2>/dev/null || skip "no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)"
rm -rf "$work"
mkdir -p "$work"
# Only the configure matters: the tests, benchmarks and the PyTorch backend stay out of it.
common=(-G Ninja -DHC_BUILD_TESTS=OFF -DHC_BUILD_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)

# configure_masked NAME FAKE_NVCC ARGS...: configures $src into $work/NAME with /usr/local/cuda
# replaced by an empty tmpfs (or one holding a failing nvcc when FAKE_NVCC=1) and hipcc masked.
configure_masked() {
  local name=$1 fake=$2
  shift 2
  unshare -m bash -s -- "$src" "$work/$name" "$cmake" "$fake" "$@" <<'SH' >"$work/$name.log" 2>&1
set -eu
src=$1 out=$2 cmake=$3 fake=$4
shift 4
mount -t tmpfs none /usr/local/cuda
if [ "$fake" = 1 ]; then
  mkdir -p /usr/local/cuda/bin /usr/local/cuda/include
  printf '#!/bin/sh\necho "nvcc fatal: this toolkit is broken" >&2\nexit 1\n' >/usr/local/cuda/bin/nvcc
  chmod +x /usr/local/cuda/bin/nvcc
  : >/usr/local/cuda/include/cuda.h
fi
hipcc=$(command -v hipcc || true)
if [ -n "$hipcc" ]; then mount --bind /dev/null "$hipcc"; fi
exec "$cmake" -S "$src" -B "$out" "$@"
SH
}

configure_masked none 0 "${common[@]}" ||
  fail "configure without GPU toolkits failed:$(printf '\n'; tail -20 "$work/none.log")"
grep -q '^CUDA backend: skipped' "$work/none/hc-backends.txt" ||
  fail "CUDA not reported skipped: $(cat "$work/none/hc-backends.txt")"
grep -q '^HIP backend: skipped' "$work/none/hc-backends.txt" ||
  fail "HIP not reported skipped: $(cat "$work/none/hc-backends.txt")"

configure_masked broken-auto 1 "${common[@]}" -DHC_WITH_HIP=OFF ||
  fail "AUTO with a broken nvcc failed the configure:$(printf '\n'; tail -20 "$work/broken-auto.log")"
grep -q '^CUDA backend: skipped (.*cannot compile a one-line kernel.*this toolkit is broken' \
  "$work/broken-auto/hc-backends.txt" ||
  fail "a broken nvcc not reported: $(cat "$work/broken-auto/hc-backends.txt")"

if configure_masked broken-on 1 "${common[@]}" -DHC_WITH_HIP=OFF -DHC_WITH_CUDA=ON; then
  fail "HC_WITH_CUDA=ON with a broken nvcc configured"
fi
# CMake wraps its error text: read the log as one line.
tr -s '\n ' '  ' <"$work/broken-on.log" | grep -q 'HC_WITH_CUDA=ON but .*cannot compile a one-line kernel' ||
  fail "HC_WITH_CUDA=ON failed without saying why:$(printf '\n'; tail -20 "$work/broken-on.log")"
echo "no toolkits: $(tr '\n' ' ' <"$work/none/hc-backends.txt")"
echo "broken nvcc: AUTO skips it, ON fails the configure"
