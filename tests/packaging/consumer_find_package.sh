#!/usr/bin/env bash
# Builds tests/packaging/consumer against the staging install with find_package(HeteroComm)
# (CMAKE_PREFIX_PATH), then runs it: the package must come from the stage, and the programs must
# load the staged libhcclient.so.1, not the build tree's.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2
consumer=$3
work=$4
cmake=$5
generator=$6
cc=$7
cxx=$8
libdir=$(install_dir "$build" LIBDIR)

rm -rf "$work"
log=$work.configure.log
"$cmake" -S "$consumer" -B "$work" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$stage" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$log" 2>&1 || { cat "$log"; fail "configure failed"; }
found=$(sed -n 's/^-- HeteroComm_DIR=//p' "$log")
[ "$found" = "$stage/$libdir/cmake/HeteroComm" ] ||
  fail "find_package found HeteroComm in '$found', not in the stage"
"$cmake" --build "$work" || fail "build against the staged package failed"

for program in consumer_c consumer_cxx; do
  lib=$(ldd "$work/$program" | sed -n 's/.*libhcclient.so.1 => \([^ ]*\).*/\1/p')
  [ "$(readlink -f "$lib")" = "$(readlink -f "$stage/$libdir/libhcclient.so.1")" ] ||
    fail "$program loads libhcclient.so.1 from '$lib', not from the stage"
  "$work/$program" || fail "$program failed"
done
