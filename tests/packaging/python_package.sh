#!/usr/bin/env bash
# The hetero_comm package as `cmake --install` lays it out (in the stage install_layout made):
# the module and the extension sit in HC_PYTHON_INSTALL_DIR under the prefix, that folder is on
# Debian python3's sys.path for the configured prefix, and the staged package imports and
# registers the backend "hetero". Skips when the build has no PyTorch backend.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2

[ -d "$build/python/hetero_comm" ] || skip "this build has no PyTorch backend (python/ found no torch)"
py=/usr/bin/python3
[ -x "$py" ] || skip "no /usr/bin/python3"
pydir=$(sed -n 's/^HC_PYTHON_INSTALL_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$pydir" ] || fail "HC_PYTHON_INSTALL_DIR is not in $build/CMakeCache.txt"
libdir=$(install_dir "$build" LIBDIR)

pkg=$stage/$pydir/hetero_comm
for f in __init__.py torch.py; do
  [ -f "$pkg/$f" ] || fail "missing after install: $pydir/hetero_comm/$f"
done
ext=$(ls "$pkg"/_C.*.so 2>/dev/null | head -1)
[ -n "$ext" ] || fail "missing after install: $pydir/hetero_comm/_C.*.so"

# Where it installs for the configured prefix must be where Debian's python3 looks.
"$py" - "$prefix/$pydir" <<'PY' || fail "$prefix/$pydir is not on $py's sys.path"
import os, sys
want = os.path.normpath(sys.argv[1])
sys.exit(0 if any(os.path.normpath(p) == want for p in sys.path) else 1)
PY

# The staged copy imports (its libhcclient from the stage) and registers the backend.
out=$(cd / && PYTHONPATH="$stage/$pydir" LD_LIBRARY_PATH="$stage/$libdir" "$py" -c '
import hetero_comm, hetero_comm.torch, torch.distributed as dist
assert "HETERO" in dist.Backend._plugins, dist.Backend._plugins
print(hetero_comm.__file__)') || fail "the staged package does not import"
case "$out" in
  "$stage"/*) ;;
  *) fail "python3 imported hetero_comm from $out, not from the stage" ;;
esac
echo "hetero_comm installs to $pydir and imports from the stage: $out"
