#!/usr/bin/env bash
# The Kubernetes manifests agree with each other, with the systemd units and with the daemon:
# see manifests_agree.py for the list. Needs python3 with PyYAML (Debian python3-yaml, which
# yamllint depends on).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
daemon=$1
src=$2
work=$3
py=$(python3_with_yaml) || skip "no python3 with the yaml module (Debian package python3-yaml)"
rm -rf "$work"
mkdir -p "$work"
"$py" "$(dirname "$0")/manifests_agree.py" "$daemon" "$src" "$work"
