#!/usr/bin/env bash
# The mixed-vendor DDP manifests (deploy/kubernetes/ddp-mixed-*.yaml) lint clean and agree with
# hetero-commd, the DaemonSet, the shim, python/ and the READMEs: see job_manifests_agree.py.
# Needs python3 with PyYAML (Debian python3-yaml); yamllint, where installed, lints the folder
# here too, so that this test alone covers the files it checks.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
daemon=$1
src=$2
work=$3
dir=$src/deploy/kubernetes
{ [ -f "$dir/ddp-mixed-job.yaml" ] && [ -f "$dir/ddp-mixed-vcjob.yaml" ]; } ||
  fail "ddp-mixed-job.yaml or ddp-mixed-vcjob.yaml missing in $dir"
py=$(python3_with_yaml) || skip "no python3 with the yaml module (Debian package python3-yaml)"
if command -v yamllint >/dev/null 2>&1; then
  yamllint --strict -f parsable -c "$dir/.yamllint" "$dir" || fail "yamllint found problems (above)"
else
  echo "yamllint is not installed: lint left to packaging.yamllint, which skips"
fi
rm -rf "$work"
mkdir -p "$work"
"$py" "$(dirname "$0")/job_manifests_agree.py" "$daemon" "$src" "$work"
