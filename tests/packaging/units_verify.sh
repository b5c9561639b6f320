#!/usr/bin/env bash
# systemd-analyze verify on the installed units. It exits 0 on many mistakes and only warns
# ("Failed to parse ..., ignoring"), so any line it prints about our units fails the test too.
# Run outside a booted systemd (containers, CI), it does not resolve User=/Group=, and it prints
# nothing about the hetero-comm user that systemd-sysusers creates on a real install; should a
# systemd version warn about that user or group missing here, that line alone is tolerated.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2
need_tool systemd-analyze "Debian package systemd"
unitdir=$stage/$(install_dir "$build" UNITDIR)

cd "$unitdir"
rc=0
out=$(systemd-analyze verify --man=no hetero-commd.socket hetero-commd.service 2>&1) || rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || fail "systemd-analyze verify exited $rc"
ours=$(printf '%s\n' "$out" | grep -e 'hetero-commd' |
  grep -v -i -E "(user|group).*hetero-comm.*(not found|no such|unknown)" || true)
[ -z "$ours" ] || fail "systemd-analyze verify warned about the units:
$ours"
echo "hetero-commd.socket and hetero-commd.service verify cleanly"
