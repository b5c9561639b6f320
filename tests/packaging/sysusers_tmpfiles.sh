#!/usr/bin/env bash
# Applies systemd/sysusers.d/hetero-comm.conf and systemd/tmpfiles.d/hetero-comm.conf to an
# empty scratch root (--root), as a package's postinst does on a node: the user and group
# hetero-comm must appear, in video and render, and /run/hetero-comm and /var/lib/hetero-comm
# must be hetero-comm:hetero-comm 0750. Root only: tmpfiles must chown to the new user.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
src=$1
root=$2
need_tool systemd-sysusers "Debian package systemd"
need_tool systemd-tmpfiles "Debian package systemd"
[ "$(id -u)" -eq 0 ] || skip "systemd-tmpfiles --root needs root to give the folders away"

rm -rf "$root"
mkdir -p "$root/etc"
touch "$root/etc/passwd" "$root/etc/group" "$root/etc/shadow" "$root/etc/gshadow"
systemd-sysusers --root="$root" "$src/systemd/sysusers.d/hetero-comm.conf" ||
  fail "systemd-sysusers rejected sysusers.d/hetero-comm.conf"

entry=$(grep '^hetero-comm:' "$root/etc/passwd") || fail "no user hetero-comm was created"
IFS=: read -r _ _ uid gid _ _ shell <<<"$entry"
[ "$uid" -lt 1000 ] || fail "hetero-comm got uid $uid, not a system uid"
case "$shell" in */nologin|*/false) ;; *) fail "hetero-comm has login shell $shell" ;; esac
group_gid=$(awk -F: '$1 == "hetero-comm" { print $3 }' "$root/etc/group")
[ "$group_gid" = "$gid" ] || fail "hetero-comm's primary group is not the group hetero-comm"
for g in video render; do
  members=$(awk -F: -v g="$g" '$1 == g { print $4 }' "$root/etc/group")
  [[ ",$members," == *",hetero-comm,"* ]] || fail "hetero-comm is not a member of $g"
done

systemd-tmpfiles --root="$root" --create "$src/systemd/tmpfiles.d/hetero-comm.conf" ||
  fail "systemd-tmpfiles rejected tmpfiles.d/hetero-comm.conf"
for dir in /run/hetero-comm /var/lib/hetero-comm; do
  [ -d "$root$dir" ] || fail "$dir was not created"
  got=$(stat -c '%u:%g %a' "$root$dir")
  [ "$got" = "$uid:$gid 750" ] || fail "$dir is '$got', expected '$uid:$gid 750'"
done
echo "user hetero-comm ($uid:$gid) in video and render; folders 0750 hetero-comm"
