#!/usr/bin/env bash
# Runs an integration test executable of a sanitizer build (its CROSSCOMPILING_EMULATOR, set by
# CMakeLists.txt when HC_SANITIZE is; ctest and test discovery start it as
# `sanitizer_run.sh TEST_EXECUTABLE ARG...`). Every sanitizer report of every process the test
# starts (daemons, rank workers, hcctl) goes to a folder of this run, and any report there fails
# the test, printed after its output: a daemon's report would otherwise sit in a log that the test
# reads only for its own assertions, and a report in the last moments of a process the test then
# kills would pass unseen. A report stops the process that makes it (halt_on_error, as ASan does by
# default and UBSan does by -fno-sanitize-recover, cmake/HcOptions.cmake).
# UCX's malloc hooks fight ASan's allocator: off (UCX_MEM_MALLOC_HOOKS, Debian's UCX 1.13) in every
# process, the daemons included (they inherit this environment).
set -uo pipefail

reports=$(mktemp -d "${TMPDIR:-/tmp}/hc-sanitizer.XXXXXX") || exit 1
trap 'rm -rf "$reports"' EXIT
chmod 1777 "$reports"  # a test's process that runs as nobody reports there too
log="log_path=$reports/report"
export ASAN_OPTIONS="halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}:$log"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}:$log"
export UCX_MEM_MALLOC_HOOKS=no

"$@"
rc=$?
shopt -s nullglob
found=("$reports"/report.*)
if [ ${#found[@]} -gt 0 ]; then
  for f in "${found[@]}"; do
    echo "== sanitizer report (${f##*/report.}: the process id)"
    cat "$f"
  done >&2
  echo "sanitizer_run.sh: ${#found[@]} sanitizer report(s) above: the test fails" >&2
  [ "$rc" -eq 0 ] && rc=1
fi
exit "$rc"
