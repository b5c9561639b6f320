// hc-perf --api nccl: one rank's communicator, buffers and operations through NCCL's API, as the
// shim's libnccl.so.2 provides it over libhcclient, so a row times what a program written for
// NCCL pays. The unique id is opaque here: the parent makes it with ncclGetUniqueId and hands its
// 128 bytes to the ranks in an hc_unique_id_t, as a framework broadcasts it.
#pragma once

#include <hetero_comm/hc.h>
#include <nccl.h>

#include <cstddef>
#include <string>

#include "bench/perf_cases.h"

namespace hc::bench {

// ncclGetUniqueId into *out; false with *error on failure.
bool ncclUniqueIdInto(hc_unique_id_t* out, std::string* error);

// Where libnccl.so.2 was loaded from and its ncclGetVersion, for the preamble.
std::string ncclLibraryText();

// One rank's NCCL communicator. Every call returns false on failure, with error() naming the call
// and NCCL's text for it (ncclGetErrorString, ncclGetLastError).
class NcclRank {
 public:
  NcclRank() = default;
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;
  ~NcclRank();  // destroys a communicator still held (after a failure)

  bool init(int nranks, const hc_unique_id_t& id, int rank);
  // One operation of case c with the given buffers on stream (null: the NULL stream; in a process
  // with no GPU runtime the call returns once the operation completed; a sim stream: once it was
  // submitted). sendrecv is a group of ncclSend and ncclRecv in a ring, as hc-perf's.
  bool issue(const Case& c, const void* send, void* recv, hc_stream_t stream);
  // ncclCommFinalize (waits for every operation issued on the communicator), then ncclCommDestroy.
  bool finish();

  // ncclMemAlloc / ncclMemFree: the daemon's segment memory in a process without a GPU runtime.
  bool memAlloc(void** ptr, size_t bytes);
  void memFree(void* ptr);

  const std::string& error() const { return error_; }

 private:
  // Records call's failure in error_; returns whether r is ncclSuccess.
  bool check(ncclResult_t r, const char* call);

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int nranks_ = 0;
  std::string error_;
};

}  // namespace hc::bench
