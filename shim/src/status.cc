// Statuses and error texts: the one hc_status_t -> ncclResult_t table, ncclGetErrorString and
// ncclGetLastError.
#include <cstdio>
#include <iterator>
#include <string>

#include "shim/src/comm_table.h"
#include "shim/src/shim.h"

namespace hc::shim {
namespace {

// Printed in shim/README.md; keep the two equal, with the timeout rule below.
constexpr ncclResult_t kStatusTable[] = {
    ncclSuccess,             // HC_OK
    ncclInProgress,          // HC_IN_PROGRESS: non-blocking init or split still running
    ncclSystemError,         // HC_NO_RESOURCE: out of memory or segment space
    ncclInvalidArgument,     // HC_INVALID_ARGUMENT
    ncclInvalidUsage,        // HC_NOT_FOUND: an unknown or already destroyed handle
    ncclSystemError,         // HC_PERMISSION_DENIED: the socket or a memory attach refused
    ncclRemoteError,         // HC_UNAVAILABLE: a dead peer, daemon, or an aborted communicator
    ncclRemoteError,         // HC_TIMEOUT: ncclTimeout where kTimeoutRule allows
    ncclRemoteError,         // HC_REMOTE_ERROR: another rank failed or disagreed
    ncclUnhandledCudaError,  // HC_DEVICE_ERROR
    ncclSystemError,         // HC_TRANSPORT_ERROR
    ncclInternalError,       // HC_INTERNAL
    ncclInvalidUsage,        // HC_UNSUPPORTED: e.g. a stream being captured into a graph
};
static_assert(std::size(kStatusTable) == HC_NUM_STATUS, "one row per hc_status_t");

// The timeout rule: ncclTimeout (8) exists from NCCL 2.30.3 on. To RCCL and to a program built
// against an older nccl.h, 8 is ncclNumResults, a value it cannot name, so only libnccl.so.2
// returns it, and only on a communicator whose caller's ncclConfig_t says 2.30.3 or later (one
// made without a config does not say). Everyone else gets ncclRemoteError, as before 2.30.3.
constexpr unsigned kFirstTimeoutVersion = NCCL_VERSION(2, 30, 3);
constexpr ncclResult_t kNcclTimeout = static_cast<ncclResult_t>(8);
static_assert(kNcclTimeout == ncclTimeout, "nccl.h's value");

bool timeoutRule(const CommInfo* comm) {
  return comm != nullptr && comm->library == Library::Nccl &&
         comm->configVersion >= kFirstTimeoutVersion;
}

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

ncclResult_t toNccl(hc_status_t status, const CommInfo* comm) {
  if (status == HC_TIMEOUT && timeoutRule(comm)) return kNcclTimeout;
  return toNccl(status);
}

ncclResult_t fromHc(hc_status_t status, ncclComm_t comm) {
  if (status == HC_OK) return ncclSuccess;
  if (status == HC_IN_PROGRESS) return ncclInProgress;
  // Under the table's lock: another thread's ncclCommAbort may be freeing comm (a waiter woken by
  // it lands here); once it left the table, only this thread's text is read.
  CommLookup live(comm);
  const ncclResult_t r = toNccl(status, live.info());
  const char* text = hc_get_last_error(live.info() != nullptr ? asHc(comm) : nullptr);
  record(text != nullptr && *text != '\0' ? text : hc_get_error_string(status));
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

ncclResult_t notReady(ncclComm_t comm) {
  const std::string which = comm != nullptr ? "communicator " + pointerText(comm)
                                            : std::string("a communicator of the group");
  return fail(ncclInvalidArgument, which +
                                       " is still initializing: wait until ncclCommGetAsyncError "
                                       "reports ncclSuccess before using it");
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
    case hc::shim::kNcclTimeout:  // 2.30.3 on; only returned where the timeout rule allows
      return "operation timed out (a rank did not post it within hetero-commd's "
             "comm.op_timeout_ms)";
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
