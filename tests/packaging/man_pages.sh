#!/usr/bin/env bash
# The installed manual pages against the programs they document:
#  - hetero-commd.toml(5) documents exactly the keys `hetero-commd --print-config` prints, each
#    with the default it prints for the system daemon;
#  - hetero-commd(8), hcctl(1) and hc-perf(1) list exactly the long options their --help prints;
#  - every page renders with groff without one warning, at the default width and at 80 columns.
# Reads the stage install_layout made; the pages are in the components with their programs.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$1
stage=$2
daemon=$3
work=$4

need_tool groff "groff-base renders the pages"
# The daemon's HC_* environment would change what --print-config prints.
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep '^HC_' || true)
rm -rf "$work"
mkdir -p "$work"

mandir=$(install_dir "$build" MANDIR)
bindir=$(install_dir "$build" BINDIR)
sbindir=$(install_dir "$build" SBINDIR)
page5=$stage/$mandir/man5/hetero-commd.toml.5
page8=$stage/$mandir/man8/hetero-commd.8
for page in "$page5" "$page8"; do [ -f "$page" ] || fail "missing after install: $page"; done

# Roff text back to plain: \- is '-', \e a backslash, \: an invisible break point.
unroff() { sed -e 's/\\-/-/g' -e 's/\\://g' -e 's/\\e/\\/g'; }

# "section.key = value" lines of --print-config, size comments dropped, sorted.
: >"$work/empty.toml"
"$daemon" --print-config --config "$work/empty.toml" --socket /run/hetero-comm/hetero-commd.sock \
  --admin-socket /run/hetero-comm/hetero-commd-admin.sock --state-dir /var/lib/hetero-comm |
  awk '/^\[/ { gsub(/[][]/, ""); section = $0; next }
       /^[a-z_]+ = / { sub(/  #.*$/, ""); print section "." $0 }' | LC_ALL=C sort >"$work/printed"
[ -s "$work/printed" ] || fail "--print-config printed no settings"

# The same from the page: a .SH "[section]" starts a section; each entry's tag line, right after
# its .TP, is "\fBkey\fR = value" with " (1 GiB)" after sizes.
awk '/^\.SH / { section = ""
               if (match($0, /^\.SH "\[[a-z_.]+\]"$/)) section = substr($0, 7, RLENGTH - 8)
               next }
     /^\.TP$/ { tag = 1; next }
     tag && section != "" && /^\\fB[a-z_]+\\fR = / {
       line = $0; sub(/^\\fB/, "", line); sub(/\\fR = /, " = ", line)
       sub(/ \([0-9]+ [KMGT]iB\)$/, "", line); print section "." line }
     { tag = 0 }' "$page5" | unroff | LC_ALL=C sort >"$work/page"
[ -s "$work/page" ] || fail "no [section] entries found in $page5"

keys() { sed 's/ = .*//' "$1"; }
if ! diff -u <(keys "$work/printed") <(keys "$work/page") >"$work/keys.diff"; then
  cat "$work/keys.diff"
  fail "hetero-commd.toml(5) keys differ from hetero-commd --print-config" \
    "(- only printed, + only in the page)"
fi
if ! diff -u "$work/printed" "$work/page" >"$work/values.diff"; then
  cat "$work/values.diff"
  fail "hetero-commd.toml(5) defaults differ from hetero-commd --print-config (- printed, + page)"
fi
echo "hetero-commd.toml(5): $(wc -l <"$work/page") keys, the same as --print-config, same defaults"

# Long options in the Options list of CLI11's --help ("  -h,--help   Print..."), and in the
# page's OPTIONS section (the tag lines after .TP), sorted.
help_options() {
  "$@" --help | awk '/^Options:/ { on = 1; next } on && /^[^ ]/ { on = 0 }
    on && /^  -/ { n = split($1, names, ",")
                   for (i = 1; i <= n; ++i) if (names[i] ~ /^--/) print names[i] }' |
    LC_ALL=C sort
}
page_options() {
  awk '/^\.SH / { on = ($0 == ".SH OPTIONS"); next } on && /^\.TP$/ { getline; print }' "$1" |
    unroff | grep -o -e '--[a-z][a-z0-9_-]*' | LC_ALL=C sort -u
}
check_options() {  # PAGE PROGRAM...
  local page=$1 name
  shift
  name=$(basename "$page")
  help_options "$@" >"$work/$name.help"
  [ -s "$work/$name.help" ] || fail "$* --help lists no options"
  page_options "$page" >"$work/$name.options"
  if ! diff -u "$work/$name.help" "$work/$name.options"; then
    fail "$name OPTIONS differ from $* --help (- only in --help, + only in the page)"
  fi
  echo "$name: $(wc -l <"$work/$name.options") long options, the same as --help"
}
check_options "$page8" "$stage/$sbindir/hetero-commd"
pages=("$page5" "$page8")
for tool in hcctl hc-perf; do
  page=$stage/$mandir/man1/$tool.1
  if [ -x "$stage/$bindir/$tool" ]; then
    [ -f "$page" ] || fail "missing after install: $page"
    check_options "$page" "$stage/$bindir/$tool"
    pages+=("$page")
  else
    echo "$tool: not built, so no page"
  fi
done

# groff exits 0 on most warnings, so stderr must be empty as well. -rLL=80n is what man uses on a
# terminal of 80 columns (and for pipes).
for page in "${pages[@]}"; do
  for width in "" "-rLL=80n"; do
    rc=0
    # shellcheck disable=SC2086  # $width is one option or none
    groff -man -Tutf8 -ww -z $width "$page" 2>"$work/groff.err" || rc=$?
    if [ "$rc" -ne 0 ] || [ -s "$work/groff.err" ]; then
      cat "$work/groff.err"
      fail "groff ${width:-(default width)} on $(basename "$page"): exit $rc, warnings above"
    fi
  done
done
echo "groff: ${#pages[@]} pages render without warnings"
