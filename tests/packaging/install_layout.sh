#!/usr/bin/env bash
# `cmake --install BUILD --prefix STAGE` into an empty folder, then check every file lands where
# hetero-comm documents it: daemon in sbin, libhcclient with its soname links, headers, CMake
# package, pkg-config file, units with ExecStart naming the staged daemon, sysusers.d,
# tmpfiles.d, the sample configuration, the manual pages and the shim's private folder. The other packaging tests inspect
# this stage.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2
cmake=${3:-cmake}

# cmake --install rewrites BUILD/install_manifest.txt: keep the one of a real install, if any.
manifest=$build/install_manifest.txt
saved=$(mktemp)
trap 'rm -f "$saved"' EXIT
had_manifest=0
if [ -f "$manifest" ]; then cp "$manifest" "$saved" && had_manifest=1; fi
rm -rf "$stage"
rc=0
"$cmake" --install "$build" --prefix "$stage" >/dev/null || rc=$?
if [ "$had_manifest" -eq 1 ]; then cp "$saved" "$manifest"; else rm -f "$manifest"; fi
[ "$rc" -eq 0 ] || fail "cmake --install exited $rc"

libdir=$(install_dir "$build" LIBDIR)
sbindir=$(install_dir "$build" SBINDIR)
includedir=$(install_dir "$build" INCLUDEDIR)
docdir=$(install_dir "$build" DOCDIR)
mandir=$(install_dir "$build" MANDIR)
unitdir=$(install_dir "$build" UNITDIR)
sysusersdir=$(install_dir "$build" SYSUSERSDIR)
tmpfilesdir=$(install_dir "$build" TMPFILESDIR)

expect_file() {
  [ -f "$stage/$1" ] || fail "missing after install: $1"
}
expect_file "$sbindir/hetero-commd"
[ -x "$stage/$sbindir/hetero-commd" ] || fail "$sbindir/hetero-commd is not executable"
expect_file "$includedir/hetero_comm/hc.h"
expect_file "$includedir/hetero_comm/hc.hpp"
expect_file "$libdir/cmake/HeteroComm/HeteroCommConfig.cmake"
expect_file "$libdir/cmake/HeteroComm/HeteroCommConfigVersion.cmake"
expect_file "$libdir/cmake/HeteroComm/HeteroCommTargets.cmake"
expect_file "$libdir/pkgconfig/hetero-comm.pc"
expect_file "$unitdir/hetero-commd.service"
expect_file "$unitdir/hetero-commd.socket"
expect_file "$sysusersdir/hetero-comm.conf"
expect_file "$tmpfilesdir/hetero-comm.conf"
expect_file "$docdir/hetero-commd.toml.sample"
expect_file "$mandir/man8/hetero-commd.8"
expect_file "$mandir/man5/hetero-commd.toml.5"
# hcctl and hc-perf are optional (gRPC, HC_BUILD_BENCH); a page the build wrote must be installed.
for tool in hcctl hc-perf; do
  [ ! -f "$build/man/$tool.1" ] || expect_file "$mandir/man1/$tool.1"
done

# libhcclient.so -> libhcclient.so.1 -> libhcclient.so.<version>, and the soname is .so.1.
[ -L "$stage/$libdir/libhcclient.so" ] || fail "libhcclient.so is not a symlink"
[ -L "$stage/$libdir/libhcclient.so.1" ] || fail "libhcclient.so.1 is not a symlink"
real=$(readlink -f "$stage/$libdir/libhcclient.so")
[ "$real" = "$(readlink -f "$stage/$libdir/libhcclient.so.1")" ] ||
  fail "libhcclient.so and libhcclient.so.1 lead to different files"
{ [ -f "$real" ] && [ ! -L "$real" ]; } || fail "libhcclient.so.1 leads to no file"
if command -v readelf >/dev/null; then
  soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libhcclient.so.1" ] || fail "soname is '$soname', not libhcclient.so.1"
fi

# The shim in its private folder, with the client library reachable beside it, and never in the
# libdir itself, where it would replace NVIDIA's libnccl.so.2 for every program.
if [ -d "$build/shim/lib" ]; then
  shimdir=$(install_dir "$build" SHIMDIR)
  for lib in libnccl.so.2 librccl.so.1; do
    expect_file "$shimdir/$lib"
    [ ! -e "$stage/$libdir/$lib" ] || fail "$lib is in $libdir, on the default library path"
  done
  [ -f "$stage/$shimdir/libhcclient.so.1" ] || fail "no libhcclient.so.1 reachable in $shimdir"
  expect_file "$mandir/man7/hetero-comm-nccl.7"
fi

# Installed files must not point back into the build tree (the stage itself lives in it).
leaks=$(grep -rIoh -e "$build/[^\"' :;]*" "$stage/$libdir/cmake" "$stage/$libdir/pkgconfig" \
  "$stage/$unitdir" | grep -v -F "$stage" || true)
[ -z "$leaks" ] || fail "installed files name the build tree:
$leaks"

# The service was configured during this install: ExecStart names the staged daemon.
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$stage/$unitdir/hetero-commd.service")
[ "$exec_start" = "$stage/$sbindir/hetero-commd" ] ||
  fail "ExecStart is '$exec_start', expected $stage/$sbindir/hetero-commd"
doc=$(sed -n 's/^Documentation=file://p' "$stage/$unitdir/hetero-commd.service")
[ "$doc" = "$stage/$docdir/hetero-commd.toml.sample" ] ||
  fail "Documentation= names '$doc', expected $stage/$docdir/hetero-commd.toml.sample"
if grep -n '@[A-Z_]*@' "$stage/$unitdir/hetero-commd.service" "$stage/$libdir/pkgconfig/hetero-comm.pc"; then
  fail "placeholders left unconfigured (above)"
fi
"$stage/$sbindir/hetero-commd" --version | grep -q '^hetero-commd ' ||
  fail "the installed daemon does not run"
echo "installed into $stage: layout OK"
