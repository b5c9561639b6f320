#!/usr/bin/env bash
# yamllint --strict (warnings fail too) on deploy/kubernetes with its .yamllint rules.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
src=$1
need_tool yamllint "Debian package yamllint, in scripts/install-deps"
dir=$src/deploy/kubernetes
{ [ -f "$dir/daemonset.yaml" ] && [ -f "$dir/configmap.yaml" ]; } || fail "manifests missing in $dir"
yamllint --strict -f parsable -c "$dir/.yamllint" "$dir" || fail "yamllint found problems (above)"
echo "yamllint: deploy/kubernetes is clean"
