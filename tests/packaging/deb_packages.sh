#!/usr/bin/env bash
# The Debian packages (cmake/HcPackaging.cmake): scripts/package --no-build makes them and runs
# lintian; then each package's files and fields, an install of all of them into a throwaway
# root (dpkg --root, maintainer scripts run against it through DPKG_ROOT), the installed daemon
# serving health to the installed hcctl, the shim loading from its private folder, the Python
# package importing, the postinst's fallback without systemd-sysusers, remove and purge.
# Needs a build configured for /usr (scripts/test configures it so), dpkg, lintian and root.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
src=$1
build=$2
work=$3

need_tool dpkg-deb "Debian package dpkg"
need_tool lintian "Debian package lintian; scripts/install-deps installs it"
[ "$(id -u)" -eq 0 ] || skip "the maintainer scripts give folders to the new users: root only"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt")
[ "$prefix" = /usr ] ||
  skip "the build is configured for $prefix, not /usr (scripts/package reconfigures it)"
libdir=/usr/$(install_dir "$build" LIBDIR)
shimdir=/usr/$(install_dir "$build" SHIMDIR)
docdir=/usr/$(install_dir "$build" DOCDIR)

rm -rf "$work"
mkdir -p "$work"
debs=$work/debs
"$src/scripts/package" --no-build "$build" "$debs" || fail "scripts/package failed (above)"

version=$(dpkg-deb -f "$debs"/hetero-commd_*.deb Version)
deb() { ls "$debs/$1"_*.deb 2>/dev/null || fail "no package $1"; }
files() { dpkg-deb -c "$(deb "$1")" | awk '{ print substr($6, 2) }'; }
has() {  # PACKAGE PATH...
  local p list
  list=$(files "$1")
  for p in "${@:2}"; do grep -qxF "$p" <<<"$list" || fail "$1 lacks $p"; done
}
depends() { dpkg-deb -f "$(deb "$1")" Depends; }

# --- What each package holds ---------------------------------------------------------------
packages=(hetero-commd libhcclient1 libhcclient-dev hetero-comm-tools)
[ ! -d "$build/shim/lib" ] || packages+=(hetero-comm-nccl)
[ ! -d "$build/python/hetero_comm" ] || packages+=(python3-hetero-comm)
for p in "${packages[@]}"; do
  has "$p" "/usr/share/doc/$p/copyright" "/usr/share/doc/$p/changelog.Debian.gz"
  [ "$(dpkg-deb -f "$(deb "$p")" Version)" = "$version" ] || fail "$p is not version $version"
  [ -n "$(depends "$p")" ] || fail "$p has no Depends"
  # A package with machine code gets the C library from dpkg-shlibdeps.
  machine_code=$(dpkg-deb -c "$(deb "$p")" | awk '$1 ~ /^-/ { print $6 }' |
    grep -E '\.so(\.[0-9]+)*$|/s?bin/' || true)
  if [ -n "$machine_code" ]; then
    [[ "$(depends "$p")" == *"libc6 ("* ]] || fail "$p: Depends lacks dpkg-shlibdeps' libc6: $(depends "$p")"
  fi
  if files "$p" | grep '/share/man/man[0-9]/.*[0-9]$'; then fail "$p: manual pages not gzipped"; fi
done
has hetero-commd /usr/sbin/hetero-commd /usr/lib/systemd/system/hetero-commd.service \
  /usr/lib/systemd/system/hetero-commd.socket /usr/lib/sysusers.d/hetero-comm.conf \
  /usr/lib/tmpfiles.d/hetero-comm.conf "$docdir/hetero-commd.toml.sample" \
  /usr/share/man/man8/hetero-commd.8.gz /usr/share/man/man5/hetero-commd.toml.5.gz
for lib in libgrpc++ libsystemd0 libucx0; do
  [[ "$(depends hetero-commd)" == *"$lib"* ]] || fail "hetero-commd: Depends lacks $lib"
done
if files hetero-commd | grep -q '^/etc/'; then fail "hetero-commd ships files in /etc"; fi
# The package is named after the SONAME (libhcclient.so.1: libhcclient1) and says so in shlibs.
has libhcclient1 "$libdir/libhcclient.so.1"
dpkg-deb --ctrl-tarfile "$(deb libhcclient1)" | tar -xO ./shlibs |
  grep -qxF "libhcclient 1 libhcclient1 (= $version)" || fail "libhcclient1: wrong shlibs"
has libhcclient-dev /usr/include/hetero_comm/hc.h "$libdir/libhcclient.so" \
  "$libdir/pkgconfig/hetero-comm.pc" "$libdir/cmake/HeteroComm/HeteroCommConfig.cmake"
for p in libhcclient-dev hetero-comm-tools; do
  [[ "$(depends $p)" == *"libhcclient1 (= $version)"* ]] || fail "$p: Depends lacks libhcclient1"
done
has hetero-comm-tools /usr/bin/hcctl /usr/share/man/man1/hcctl.1.gz
if [[ " ${packages[*]} " == *" hetero-comm-nccl "* ]]; then
  has hetero-comm-nccl "$shimdir/libnccl.so.2" "$shimdir/librccl.so.1" "$shimdir/libhcclient.so.1" \
    /usr/share/man/man7/hetero-comm-nccl.7.gz /usr/share/doc/hetero-comm-nccl/README.Debian
  # Never on the default library path, where it would replace NVIDIA's libnccl for every program.
  if files hetero-comm-nccl | grep -E "^$libdir/lib[nr]ccl"; then fail "the shim is in $libdir"; fi
fi
if [[ " ${packages[*]} " == *" python3-hetero-comm "* ]]; then
  torch=$(dpkg-query -W -f='${Version}' python3-torch)
  [[ "$(depends python3-hetero-comm)" == *"python3-torch (= $torch)"* ]] ||
    fail "python3-hetero-comm is not pinned to python3-torch $torch: $(depends python3-hetero-comm)"
fi

# --- Install into a throwaway root ---------------------------------------------------------
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
touch "$root/etc/passwd" "$root/etc/group" "$root/etc/shadow" "$root/etc/gshadow"
# CPack's libhcclient1 scripts call a bare `ldconfig`, which would rewrite this machine's cache:
# a stand-in that does nothing comes first on PATH.
mkdir -p "$work/bin"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/ldconfig"
chmod +x "$work/bin/ldconfig"
dpkg_root() {
  PATH=$work/bin:$PATH dpkg --root="$root" --force-script-chrootless --force-depends \
    --log=/dev/null "$@"
}
debfiles=()
for p in "${packages[@]}"; do debfiles+=("$(deb "$p")"); done
dpkg_root --install "${debfiles[@]}" >"$work/dpkg-install.log" 2>&1 ||
  { cat "$work/dpkg-install.log"; fail "dpkg --install into $root failed"; }

grep -q '^hetero-comm:' "$root/etc/passwd" || fail "postinst made no user hetero-comm"
members=$(awk -F: '$1 == "hetero-comm-admin" { print $4 }' "$root/etc/group")
[[ ",$members," == *",hetero-comm,"* ]] || fail "hetero-comm is not in hetero-comm-admin"
[ "$(stat -c %U "$root/var/lib/hetero-comm")" = hetero-comm ] 2>/dev/null ||
  grep -q "^[^:]*:[^:]*:$(stat -c %u "$root/var/lib/hetero-comm"):" "$root/etc/passwd" ||
  fail "/var/lib/hetero-comm was not created for hetero-comm"
if [ -d "$root/etc/systemd/system" ] && find "$root/etc/systemd/system" -name 'hetero-commd*' | grep -q .; then
  fail "the package enabled a unit"
fi
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$root/usr/lib/systemd/system/hetero-commd.service")
[ "$exec_start" = /usr/sbin/hetero-commd ] || fail "ExecStart names $exec_start"

# --- The installed daemon serves health to the installed hcctl ------------------------------
run=$work/run
mkdir -p "$run" "$work/state"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s|/run/hetero-comm/|$run/|" -e "s|^state_dir = .*|state_dir = \"$work/state\"|" \
  -e "s|^health_listen = .*|health_listen = \"127.0.0.1:$port\"|" \
  -e 's|^socket_group = .*|socket_group = ""|' -e 's|^measure = .*|measure = false|' \
  "$root$docdir/hetero-commd.toml.sample" >"$work/hetero-commd.toml"
"$root/usr/sbin/hetero-commd" --config "$work/hetero-commd.toml" >"$work/daemon.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true' EXIT
health=""
for _ in $(seq 100); do
  health=$("$root/usr/bin/hcctl" --address "127.0.0.1:$port" health 2>&1) && break
  kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log"; fail "the installed daemon exited"; }
  sleep 0.1
done
[[ "$health" == *SERVING* ]] || { cat "$work/daemon.log"; fail "hcctl health said: $health"; }
"$root/usr/bin/hcctl" --socket "$run/hetero-commd-admin.sock" health | grep -q SERVING ||
  fail "hcctl health over the admin socket is not SERVING"
kill "$daemon"
wait "$daemon" || fail "the installed daemon did not exit cleanly on SIGTERM"
trap - EXIT
# hc-perf finds the installed libhcclient.so.1 through its RUNPATH.
client=$(LD_LIBRARY_PATH='' ldd "$root/usr/bin/hc-perf" | sed -n 's/.*libhcclient.so.1 => \(\S*\).*/\1/p')
[ "$(readlink -f "$client")" = "$(readlink -f "$root$libdir/libhcclient.so.1")" ] ||
  fail "hc-perf loads libhcclient.so.1 from '$client', not from the throwaway root"

# --- The shim from its private folder, the Python package from dist-packages -----------------
if [[ " ${packages[*]} " == *" hetero-comm-nccl "* ]]; then
  got=$(cd / && LD_LIBRARY_PATH=$root$shimdir /usr/bin/python3 -c '
import ctypes
nccl = ctypes.CDLL("libnccl.so.2")
v = ctypes.c_int()
assert nccl.ncclGetVersion(ctypes.byref(v)) == 0
print(v.value)') || fail "libnccl.so.2 does not load with LD_LIBRARY_PATH=$shimdir"
  [ "$got" = 23007 ] || fail "ncclGetVersion said $got"
  LD_LIBRARY_PATH='' LD_PRELOAD=$root$shimdir/librccl.so.1 /bin/true ||
    fail "LD_PRELOAD=$shimdir/librccl.so.1 does not load"
fi
if [[ " ${packages[*]} " == *" python3-hetero-comm "* ]]; then
  got=$(cd / && PYTHONPATH=$root/usr/lib/python3/dist-packages LD_LIBRARY_PATH=$root$libdir \
    /usr/bin/python3 -c '
import hetero_comm, hetero_comm.torch, torch.distributed as dist
assert "HETERO" in dist.Backend._plugins
print(hetero_comm.__file__)') || fail "the installed hetero_comm does not import"
  [[ "$got" == "$root"/* ]] || fail "hetero_comm came from $got, not the throwaway root"
fi

# --- The postinst without systemd-sysusers: the shadow tools, from the same file ------------
bare=$work/bare
mkdir -p "$bare/etc" "$bare/usr/lib/sysusers.d" "$work/bare-bin"
touch "$bare/etc/passwd" "$bare/etc/group" "$bare/etc/shadow" "$bare/etc/gshadow"
cp "$root/usr/lib/sysusers.d/hetero-comm.conf" "$bare/usr/lib/sysusers.d/"
for tool in sh grep groupadd useradd usermod; do ln -sf "$(command -v $tool)" "$work/bare-bin/"; done
PATH=$work/bare-bin DPKG_ROOT=$bare sh "$root/var/lib/dpkg/info/hetero-commd.postinst" configure ||
  fail "the postinst failed without systemd-sysusers"
for g in video render hetero-comm-admin; do
  members=$(awk -F: -v g="$g" '$1 == g { print $4 }' "$bare/etc/group")
  [[ ",$members," == *",hetero-comm,"* ]] || fail "fallback: hetero-comm is not in $g"
done
grep -q '^hetero-comm:[^:]*:[0-9]*:[0-9]*:hetero-comm daemon:/var/lib/hetero-comm:/usr/sbin/nologin$' \
  "$bare/etc/passwd" || fail "fallback: user hetero-comm is not as sysusers.d declares it"
PATH=$work/bare-bin DPKG_ROOT=$bare sh "$root/var/lib/dpkg/info/hetero-commd.postinst" configure ||
  fail "the fallback postinst is not idempotent"

# --- Remove keeps the configuration, purge deletes it (and enable links), users stay ----------
mkdir -p "$root/etc/hetero-comm" "$root/etc/systemd/system/sockets.target.wants"
echo '[server]' >"$root/etc/hetero-comm/hetero-commd.toml"
ln -s /usr/lib/systemd/system/hetero-commd.socket \
  "$root/etc/systemd/system/sockets.target.wants/hetero-commd.socket"
dpkg_root --remove hetero-commd >/dev/null || fail "dpkg --remove hetero-commd failed"
[ ! -e "$root/usr/sbin/hetero-commd" ] || fail "remove left the daemon"
[ -f "$root/etc/hetero-comm/hetero-commd.toml" ] || fail "remove deleted the configuration"
dpkg_root --purge hetero-commd >/dev/null || fail "dpkg --purge hetero-commd failed"
[ ! -e "$root/etc/hetero-comm" ] || fail "purge left /etc/hetero-comm"
[ ! -e "$root/var/lib/hetero-comm" ] || fail "purge left /var/lib/hetero-comm"
[ ! -L "$root/etc/systemd/system/sockets.target.wants/hetero-commd.socket" ] ||
  fail "purge left the enable link"
grep -q '^hetero-comm:' "$root/etc/passwd" || fail "purge deleted the user (Debian keeps it)"
others=("${packages[@]:1}")
dpkg_root --purge "${others[@]}" >/dev/null || fail "dpkg --purge ${others[*]} failed"
left=$(find "$root" -path "$root/var/lib/dpkg" -prune -o -path "$root/etc" -prune -o \
  \( -type f -o -type l \) -print)
[ -z "$left" ] || fail "files left after purging every package: $left"

echo "packages ${packages[*]} ($version): contents, lintian, install, health, shim, python," \
  "purge OK"
