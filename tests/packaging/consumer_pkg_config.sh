#!/usr/bin/env bash
# Compiles tests/packaging/consumer/consumer.c with `pkg-config --cflags --libs hetero-comm`
# from the staging install (PKG_CONFIG_PATH) and runs it against the staged libhcclient.so.1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2
consumer=$3
work=$4
cc=$5
need_tool pkg-config "Debian package pkg-config"
libdir=$(install_dir "$build" LIBDIR)

export PKG_CONFIG_PATH=$stage/$libdir/pkgconfig
prefix=$(pkg-config --variable=prefix hetero-comm) || fail "pkg-config does not find hetero-comm"
[ "$prefix" = "$stage" ] || fail "hetero-comm.pc has prefix '$prefix', not the stage $stage"
flags=$(pkg-config --cflags --libs hetero-comm)
echo "pkg-config --cflags --libs hetero-comm: $flags"
pc_libdir=$(pkg-config --variable=libdir hetero-comm)
[ -f "$pc_libdir/libhcclient.so" ] || fail "no libhcclient.so in the .pc file's libdir $pc_libdir"

rm -rf "$work"
mkdir -p "$work"
# shellcheck disable=SC2086  # $flags is a list of compiler words
"$cc" -std=c11 -Wall -Wextra -Werror "$consumer/consumer.c" -o "$work/consumer_c" $flags \
  -Wl,-rpath,"$pc_libdir" || fail "compiling with the pkg-config flags failed"
"$work/consumer_c" || fail "consumer_c failed"
