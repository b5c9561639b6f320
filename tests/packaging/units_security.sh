#!/usr/bin/env bash
# systemd-analyze security --offline=true --threshold=30 on the installed service: exposure at
# most 3.0 on systemd's 0-10 scale (the threshold is on 0-100). First a bare notify service must
# fail the same gate, so a systemd-analyze that ignores --threshold cannot pass us by default.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2
work=$3
need_tool systemd-analyze "Debian package systemd"
unit=$stage/$(install_dir "$build" UNITDIR)/hetero-commd.service

mkdir -p "$work"
cat >"$work/bare-notify.service" <<UNIT
[Service]
Type=notify
ExecStart=/bin/true
UNIT
if systemd-analyze security --offline=true --threshold=30 "$work/bare-notify.service" >/dev/null 2>&1; then
  fail "a bare service passed --threshold=30: this systemd-analyze does not enforce the gate"
fi

rc=0
out=$(systemd-analyze security --offline=true --threshold=30 "$unit" 2>&1) || rc=$?
printf '%s\n' "$out" | grep -E '^✗|Overall exposure' || true
[ "$rc" -eq 0 ] || fail "exposure above 3.0 (systemd-analyze security exited $rc)"
printf '%s\n' "$out" | grep -q 'Overall exposure level' || fail "no exposure level printed"
