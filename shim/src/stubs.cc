// Functions the shim exports but does not implement yet. Each returns ncclInvalidUsage with a
// ncclGetLastError text naming what is missing: never a crash, never a silent success.
#include <cstdio>

#include "shim/src/shim.h"

using hc::shim::unsupported;

namespace {

constexpr const char* kWindows = "symmetric memory windows and one-sided signals";
constexpr const char* kParams = "NCCL parameters (the shim is configured by hetero-commd)";

}  // namespace

// Defines name(params) returning unsupported(name, why), and its pnccl twin.
#define HC_NCCL_STUB(name, params, why)                                   \
  extern "C" ncclResult_t name params { return unsupported(#name, why); } \
  HC_NCCL_TWIN(name)

HC_NCCL_STUB(ncclCommGetUniqueId, (ncclComm_t, ncclUniqueId*), "growing a communicator")
HC_NCCL_STUB(ncclCommGrow, (ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*),
             "growing a communicator")
HC_NCCL_STUB(ncclCommSuspend, (ncclComm_t, int), "releasing device memory (suspend/resume)")
HC_NCCL_STUB(ncclCommResume, (ncclComm_t), "releasing device memory (suspend/resume)")
HC_NCCL_STUB(ncclCommMemStats, (ncclComm_t, ncclCommMemStat_t, uint64_t*),
             "device memory statistics")
HC_NCCL_STUB(ncclCommWindowRegister, (ncclComm_t, void*, size_t, ncclWindow_t*, int), kWindows)
HC_NCCL_STUB(ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t), kWindows)
HC_NCCL_STUB(ncclWinGetUserPtr, (ncclComm_t, ncclWindow_t, void**), kWindows)
HC_NCCL_STUB(ncclPutSignal,
             (const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
              unsigned int, ncclComm_t, cudaStream_t),
             kWindows)
HC_NCCL_STUB(ncclSignal, (int, int, int, unsigned int, ncclComm_t, cudaStream_t), kWindows)
HC_NCCL_STUB(ncclWaitSignal, (int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t), kWindows)
HC_NCCL_STUB(ncclGroupSimulateEnd, (ncclSimInfo_t*), "a cost model to simulate groups with")
HC_NCCL_STUB(ncclParamBind, (ncclParamHandle_t*, const char*), kParams)
HC_NCCL_STUB(ncclParamGetI8, (ncclParamHandle_t, int8_t*), kParams)
HC_NCCL_STUB(ncclParamGetI16, (ncclParamHandle_t, int16_t*), kParams)
HC_NCCL_STUB(ncclParamGetI32, (ncclParamHandle_t, int32_t*), kParams)
HC_NCCL_STUB(ncclParamGetI64, (ncclParamHandle_t, int64_t*), kParams)
HC_NCCL_STUB(ncclParamGetU8, (ncclParamHandle_t, uint8_t*), kParams)
HC_NCCL_STUB(ncclParamGetU16, (ncclParamHandle_t, uint16_t*), kParams)
HC_NCCL_STUB(ncclParamGetU32, (ncclParamHandle_t, uint32_t*), kParams)
HC_NCCL_STUB(ncclParamGetU64, (ncclParamHandle_t, uint64_t*), kParams)
HC_NCCL_STUB(ncclParamGetStr, (ncclParamHandle_t, const char**), kParams)
HC_NCCL_STUB(ncclParamGet, (ncclParamHandle_t, void*, int, int*), kParams)
HC_NCCL_STUB(ncclParamGetParameter, (const char*, const char**, int*), kParams)
HC_NCCL_STUB(ncclParamGetAllParameterKeys, (const char***, int*), kParams)

// void: nothing to return, so it says so on stderr.
extern "C" void ncclParamDumpAll(void) {
  (void)unsupported("ncclParamDumpAll", kParams);
  std::fputs("NCCL WARN ncclParamDumpAll: hetero-comm's shim has no NCCL parameters\n", stderr);
}
HC_NCCL_TWIN(ncclParamDumpAll)
