#!/usr/bin/env bash
# Runs notify_protocol.py: hetero-commd under a stand-in for systemd (see that file).
#   notify_protocol.sh activation|watchdog HETERO_COMMD SOURCE_DIR WORK_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
mode=$1
daemon=$2
src=$3
work=$4
py=$(command -v /usr/bin/python3 || command -v python3) || skip "python3 is not installed"
rm -rf "$work"
mkdir -p "$work"
"$py" "$(dirname "$0")/notify_protocol.py" "$mode" "$daemon" "$src/systemd/hetero-commd.service.in" "$work"
