#!/usr/bin/env bash
# The shim's exported symbols, SONAMEs, dev links and RUNPATH.
#   shim_symbols.sh <libdir>   (the folder holding libnccl.so.2 and librccl.so.1)
# The list of functions is NCCL 2.30.7's host API (nccl-abi.md's appendix) plus RCCL's
# all-to-all spellings, written here, not read from the shim's header. Each must be exported as
# ncclX and pncclX (functions, unversioned) by both libraries, and nothing else may be.
set -euo pipefail
libdir=$1

functions="
ncclMemAlloc ncclMemFree ncclGetVersion ncclGetUniqueId ncclCommInitRankConfig
ncclCommInitRank ncclCommInitAll ncclCommFinalize ncclCommDestroy ncclCommAbort ncclCommRevoke
ncclCommSplit ncclCommShrink ncclCommGetUniqueId ncclCommGrow ncclCommInitRankScalable
ncclGetErrorString ncclGetLastError ncclResetDebugInit ncclCommGetAsyncError ncclCommCount
ncclCommCuDevice ncclCommUserRank ncclCommRegister ncclCommDeregister ncclCommSuspend
ncclCommResume ncclCommMemStats ncclCommWindowRegister ncclCommWindowDeregister
ncclWinGetUserPtr ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclReduce ncclBcast
ncclBroadcast ncclAllReduce ncclReduceScatter ncclAllGather ncclAlltoAll ncclGather ncclScatter
ncclSend ncclRecv ncclPutSignal ncclSignal ncclWaitSignal ncclGroupStart ncclGroupEnd
ncclGroupSimulateEnd ncclParamBind ncclParamGetI8 ncclParamGetI16 ncclParamGetI32
ncclParamGetI64 ncclParamGetU8 ncclParamGetU16 ncclParamGetU32 ncclParamGetU64 ncclParamGetStr
ncclParamGet ncclParamGetParameter ncclParamGetAllParameterKeys ncclParamDumpAll
ncclAllToAll ncclAllToAllv ncclAlltoAllv
"

want=$(for f in $functions; do echo "$f"; echo "p$f"; done | sort)
count=$(echo "$want" | wc -l)
[ "$count" -eq 134 ] || { echo "FAIL: the test's own list has $count names, want 134"; exit 1; }
failed=0
fail() { echo "FAIL: $*"; failed=1; }

check() {  # <file> <soname>
  local lib=$libdir/$1 soname=$2
  [ -f "$lib" ] || { fail "$lib missing"; return; }
  # Defined dynamic symbols, minus the linker's own; every one must be a function (T).
  local got
  got=$(nm -D --defined-only "$lib" | awk '{print $2, $3}')
  local bad
  bad=$(echo "$got" | awk '$1 != "T" {print}')
  [ -z "$bad" ] || fail "$1 exports non-function or versioned symbols: $bad"
  local names
  names=$(echo "$got" | awk '{print $2}' | sort)
  local missing extra
  missing=$(comm -23 <(echo "$want") <(echo "$names"))
  extra=$(comm -13 <(echo "$want") <(echo "$names"))
  [ -z "$missing" ] || fail "$1 does not export: $(echo $missing)"
  [ -z "$extra" ] || fail "$1 exports more than NCCL's API: $(echo $extra)"
  if nm -D --defined-only "$lib" | grep -q '@'; then fail "$1 has versioned symbols"; fi
  local dyn
  dyn=$(readelf -d "$lib")
  echo "$dyn" | grep -q "(SONAME).*\[$soname\]" || fail "$1: SONAME is not $soname"
  echo "$dyn" | grep -q '(RUNPATH).*\[\$ORIGIN\]' || fail "$1: RUNPATH is not \$ORIGIN"
  echo "$dyn" | grep -q '(NEEDED).*\[libhcclient.so.1\]' || fail "$1 does not need libhcclient.so.1"
  local dev=$libdir/${soname%.so.*}.so
  [ "$(readlink -f "$dev")" = "$(readlink -f "$lib")" ] || fail "$dev does not lead to $1"
  [ -e "$libdir/libhcclient.so.1" ] || fail "no libhcclient.so.1 beside $1"
  # The library loads alone, as LD_PRELOAD or dlopen would load it: its RUNPATH finds the client.
  LD_LIBRARY_PATH= ldd "$lib" | grep -q 'libhcclient.so.1 => .*not found' &&
    fail "$1 cannot find libhcclient.so.1 through its RUNPATH"
  LD_LIBRARY_PATH= LD_PRELOAD=$lib /bin/true || fail "LD_PRELOAD=$lib alone does not load"
  true
}

check libnccl.so.2 libnccl.so.2
check librccl.so.1 librccl.so.1
if [ "$failed" -eq 0 ]; then
  echo "PASS: $count symbols from each library, SONAMEs, dev links, RUNPATH \$ORIGIN"
fi
exit "$failed"
