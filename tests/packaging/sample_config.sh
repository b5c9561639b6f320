#!/usr/bin/env bash
# systemd/hetero-commd.toml, the sample configuration, against the daemon it documents:
#  - hetero-commd --check-config accepts it;
#  - it sets every key that --print-config lists, and no other (a new key must be documented);
#  - every value is the default (it documents defaults; it must not change behaviour);
#  - its socket is the path the systemd socket unit listens on.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
daemon=$1
src=$2
work=$3
sample=$src/systemd/hetero-commd.toml

# The daemon's HC_* environment would override the file; this test is about the file.
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep '^HC_' || true)
rm -rf "$work"
mkdir -p "$work"

"$daemon" --check-config --config "$sample" || fail "hetero-commd --check-config rejects the sample"

# "section.key = value" lines from --print-config output (comments dropped, sorted).
settings() {
  awk '/^\[/ { gsub(/[][]/, ""); section = $0; next }
       /^[a-z_]+ = / { sub(/ *#.*$/, ""); print section "." $0 }' | LC_ALL=C sort
}
keys() { sed 's/ = .*//'; }

: >"$work/empty.toml"
# The same --socket on both sides: the built-in default differs between root and other users.
# The admin socket's default follows --socket; pin it so that both runs print the same.
"$daemon" --print-config --config "$work/empty.toml" --socket /x --admin-socket /run/hetero-comm/hetero-commd-admin.sock | settings >"$work/defaults"
"$daemon" --print-config --config "$sample" --socket /x --admin-socket /run/hetero-comm/hetero-commd-admin.sock | settings >"$work/sample"
[ -s "$work/defaults" ] || fail "--print-config printed no settings"

# Keys the sample assigns itself, read from the file (not from the daemon's merged view).
awk '/^\[/ { gsub(/[][]/, ""); section = $0; next }
     /^[a-z_]+ *=/ { sub(/ *=.*/, ""); print section "." $0 }' "$sample" | LC_ALL=C sort >"$work/sample-keys"
if ! diff -u <(keys <"$work/defaults") "$work/sample-keys"; then
  fail "the sample's keys differ from hetero-commd --print-config (- missing, + unknown)"
fi
if ! diff -u "$work/defaults" "$work/sample"; then
  fail "the sample sets values other than the defaults (- default, + sample)"
fi

socket=$(sed -n 's/^socket = "\(.*\)"$/\1/p' "$sample")
listen=$(sed -n 's/^ListenSequentialPacket=//p' "$src/systemd/hetero-commd.socket")
[ "$socket" = "$listen" ] ||
  fail "sample server.socket '$socket' is not the socket unit's ListenSequentialPacket '$listen'"
echo "sample: $(wc -l <"$work/defaults") keys, all at their defaults; check-config OK"
