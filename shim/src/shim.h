// The shim's internals: NCCL's C API (nccl.h) implemented over libhcclient (hc.h).
//
// Every exported function is defined as ncclX and gets its profiling twin pncclX as an alias
// (HC_NCCL_TWIN), so both names reach one body. The library is built with hidden visibility;
// nccl.h is included here with default visibility, so exactly the declared API is exported, and
// the version script keeps only nccl* and pnccl* global.
#pragma once

#include <string>

#include "hetero_comm/hc.h"

#pragma GCC visibility push(default)
#include "nccl.h"
#pragma GCC visibility pop

// pnccl##name: the same function under its profiling name.
#define HC_NCCL_TWIN(name) extern "C" __attribute__((alias(#name))) decltype(name) p##name;

namespace hc::shim {

struct CommInfo;  // comm_table.h

// ---- status (status.cc) ----
// The one table from hc_status_t to ncclResult_t.
ncclResult_t toNccl(hc_status_t status);
// The table plus the timeout rule: HC_TIMEOUT is ncclTimeout only from libnccl.so.2 on a
// communicator whose caller's ncclConfig_t version is 2.30.3 or later (comm may be null).
ncclResult_t toNccl(hc_status_t status, const CommInfo* comm);
// Maps status (with comm's entry in the side table, for the timeout rule); on failure records
// hc's message for comm (NULL, or a communicator no longer in the table: this thread's last call)
// as ncclGetLastError's text and logs it at NCCL_DEBUG=WARN.
ncclResult_t fromHc(hc_status_t status, ncclComm_t comm);
// As fromHc, for the calls that connect to the daemon (unique id, init, memory): a daemon that
// cannot be reached is ncclSystemError with a text naming the socket and how to start one.
ncclResult_t fromHcConnecting(hc_status_t status, const char* function);
// A call on a communicator whose non-blocking init or split is still running (hc submitted
// nothing): ncclInvalidArgument, as NCCL answers a use before ncclCommGetAsyncError said
// ncclSuccess. Never ncclInProgress, which would claim the operation was enqueued.
ncclResult_t notReady(ncclComm_t comm);
// Records text (prefixed with what) as this thread's last error and returns result.
ncclResult_t fail(ncclResult_t result, const std::string& text);
// For functions the shim exports but does not implement yet: ncclInvalidUsage with a text that
// names the function and what is missing.
ncclResult_t unsupported(const char* function, const char* missing);
// ncclGetLastError's text: this thread's last failure.
const char* tlsLastErrorText();

// ---- arguments ----
inline hc_comm_t asHc(ncclComm_t comm) { return reinterpret_cast<hc_comm_t>(comm); }
inline ncclComm_t asNccl(hc_comm_t comm) { return reinterpret_cast<ncclComm_t>(comm); }
// ncclSuccess with *out set, or ncclInvalidArgument with a message for a dtype out of range.
ncclResult_t toHcDtype(ncclDataType_t dtype, hc_dtype_t* out);

// ---- completion (group.cc) ----
// Asks hc to order comm's operations on streams as NCCL does (hc_comm_order_on_streams with this
// library's runtime: CUDA for libnccl.so.2, HIP for librccl.so.1). Call on every communicator
// made (init, split, InitAll). Whether it took is the process's stream mode: the client finds a
// runtime once per process, so every communicator of the process agrees.
void orderOnStreams(ncclComm_t comm);
// true once a communicator of this process is ordered on streams.
bool streamsOrdered();
// Submits one operation, as NCCL does. Where the library's GPU runtime is loaded (streamsOrdered)
// hc orders it on its stream, whatever memory its buffers are in, NULL being the runtime's legacy
// default stream, and the call returns once it is enqueued. In a process with no GPU runtime the
// NULL-stream operation completes before the call returns, or, inside a group, before the
// outermost ncclGroupEnd returns: there is no stream to order it on.
template <class Submit>
ncclResult_t issue(ncclComm_t comm, hcNcclStream_t stream, Submit&& submit);
ncclResult_t trackOrWait(ncclComm_t comm, hc_request_t req);
// The depth of this thread's ncclGroupStart nesting (0: no group open).
int groupDepth();
// An init issued inside a group, which hc runs non-blocking: the outermost ncclGroupEnd waits for
// it when blocking (the caller asked for a blocking communicator), else reports ncclInProgress
// while it runs. Nothing blocks before that end, as PyTorch and nccl-tests expect of NCCL.
void deferInit(ncclComm_t comm, bool blocking);

template <class Submit>
ncclResult_t issue(ncclComm_t comm, hcNcclStream_t stream, Submit&& submit) {
  // In a process with no GPU runtime a non-NULL stream (a sim stream, or a handle of nothing) is
  // asynchronous too: the call returns once submitted and ncclCommFinalize waits.
  const bool onStream = streamsOrdered() || stream != nullptr;
  hc_request_t req = nullptr;
  const hc_status_t s = submit(onStream ? nullptr : &req);
  if (s == HC_IN_PROGRESS) return notReady(comm);
  if (s != HC_OK || onStream) return fromHc(s, comm);
  return trackOrWait(comm, req);
}

// ---- environment and debug output (env.cc) ----
enum class DebugLevel { None, Version, Warn, Info, Trace };
DebugLevel debugLevel();
// Prints the NCCL_DEBUG=VERSION banner once per process (from the first init).
void printBannerOnce();
void rereadDebugEnv();
// One line of debug output, "HOST:PID:TID [RANK] NCCL LEVEL text" as NCCL prints it, to stderr or
// to NCCL_DEBUG_FILE (%h the host, %p the pid; opened once, per process).
void debugLine(const char* level, const std::string& text);
// At NCCL_DEBUG=INFO: one line per event (init, split, finalize, abort), and the NCCL_* variables
// set in the environment that hetero-comm does not use (once per process).
void info(const std::string& text);
// A communicator as NCCL's logs name it: 0x followed by the handle's address.
std::string pointerText(const void* p);
// The file name of this library ("libnccl.so.2" or "librccl.so.1"), set per library.
const char* libraryName();

}  // namespace hc::shim
