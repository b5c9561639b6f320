// Statuses and error texts: the one hc_status_t -> ncclResult_t table, ncclGetErrorString and
// ncclGetLastError.
#include <cstdio>
#include <iterator>
#include <string>

#include "shim/src/shim.h"

namespace hc::shim {
namespace {

// Printed in shim/README.md; keep the two equal.
constexpr ncclResult_t kStatusTable[] = {
    ncclSuccess,             // HC_OK
    ncclInProgress,          // HC_IN_PROGRESS: non-blocking init or split still running
    ncclSystemError,         // HC_NO_RESOURCE: out of memory or segment space
    ncclInvalidArgument,     // HC_INVALID_ARGUMENT
    ncclInvalidUsage,        // HC_NOT_FOUND: an unknown or already destroyed handle
    ncclSystemError,         // HC_PERMISSION_DENIED: the socket or a memory attach refused
    ncclRemoteError,         // HC_UNAVAILABLE: a dead peer, daemon, or an aborted communicator
    ncclRemoteError,         // HC_TIMEOUT: for now (ncclTimeout needs a 2.30.3+ caller)
    ncclRemoteError,         // HC_REMOTE_ERROR: another rank failed or disagreed
    ncclUnhandledCudaError,  // HC_DEVICE_ERROR
    ncclSystemError,         // HC_TRANSPORT_ERROR
    ncclInternalError,       // HC_INTERNAL
};
static_assert(std::size(kStatusTable) == HC_NUM_STATUS, "one row per hc_status_t");

thread_local std::string tlsLastError;

void record(const std::string& text) {
  tlsLastError = text;
  if (debugLevel() >= DebugLevel::Warn) debugLine("WARN", text);
}

}  // namespace

const char* tlsLastErrorText() { return tlsLastError.c_str(); }

ncclResult_t toNccl(hc_status_t status) {
  const int i = static_cast<int>(status);
  return i >= 0 && i < HC_NUM_STATUS ? kStatusTable[i] : ncclInternalError;
}

ncclResult_t fromHc(hc_status_t status, ncclComm_t comm) {
  const ncclResult_t r = toNccl(status);
  if (r != ncclSuccess && r != ncclInProgress) {
    const char* text = hc_get_last_error(asHc(comm));
    record(text != nullptr && *text != '\0' ? text : hc_get_error_string(status));
  }
  return r;
}

ncclResult_t fromHcConnecting(hc_status_t status, const char* function) {
  const char* text = hc_get_last_error(nullptr);
  const std::string why = text != nullptr ? text : "";
  // libhcclient's words when the socket cannot be reached: "connect PATH: REASON ...".
  if ((status == HC_UNAVAILABLE || status == HC_PERMISSION_DENIED) &&
      why.rfind("connect ", 0) == 0) {
    return fail(ncclSystemError,
                std::string(function) + ": no hetero-commd to talk to: " + why +
                    ". Start it (systemctl start hetero-commd), or set HC_SOCKET to the socket of "
                    "a running one; a user outside the hetero-comm group may not connect");
  }
  return fromHc(status, nullptr);
}

ncclResult_t fail(ncclResult_t result, const std::string& text) {
  record(text);
  return result;
}

ncclResult_t unsupported(const char* function, const char* missing) {
  return fail(ncclInvalidUsage, std::string(function) + " is not supported by hetero-comm's " +
                                    libraryName() + " yet: " + missing);
}

ncclResult_t toHcDtype(ncclDataType_t dtype, hc_dtype_t* out) {
  const int v = static_cast<int>(dtype);
  if (v < 0 || v >= ncclNumTypes) {
    return fail(ncclInvalidArgument, "datatype " + std::to_string(v) +
                                         " is not an ncclDataType_t (0 to " +
                                         std::to_string(ncclNumTypes - 1) + ")");
  }
  *out = static_cast<hc_dtype_t>(v);
  return ncclSuccess;
}

}  // namespace hc::shim

using hc::shim::asHc;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (static_cast<int>(result)) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled device error (run with NCCL_DEBUG=WARN for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=WARN for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the hetero-comm developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case 8:  // ncclTimeout from 2.30.3 on
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  // The text of this thread's last failed call, whatever communicator it was on.
  return hc::shim::tlsLastErrorText();
}

}  // extern "C"

HC_NCCL_TWIN(ncclGetErrorString)
HC_NCCL_TWIN(ncclGetLastError)
