# shellcheck shell=bash
# Shared by the packaging test scripts (sourced): messages, skips, and the install layout as
# cmake/HcInstall.cmake records it.

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Exit code 77 is SKIP_RETURN_CODE in CMakeLists.txt: ctest reports the test as skipped.
skip() {
  echo "SKIP: $*"
  exit 77
}

need_tool() {
  command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed${2:+ ($2)}"
}

# install_dir BUILD_DIR NAME: where NAME (LIBDIR, SBINDIR, INCLUDEDIR, DOCDIR, MANDIR, UNITDIR,
# SYSUSERSDIR, TMPFILESDIR, SHIMDIR) goes, relative to the prefix, as cmake/HcInstall.cmake recorded it.
install_dir() {
  local file=$1/hc-install/install-dirs.txt value
  [ -f "$file" ] || fail "$file is missing (cmake/HcInstall.cmake writes it)"
  value=$(sed -n "s/^$2=//p" "$file")
  [ -n "$value" ] || fail "$2 is not in $file"
  printf '%s\n' "$value"
}

# The python3 with Debian's modules (a pyenv python3 earlier on PATH lacks them).
python3_with_yaml() {
  local py
  for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import yaml' 2>/dev/null; then
      command -v "$py"
      return 0
    fi
  done
  return 1
}
