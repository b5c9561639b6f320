// One hc-perf rank's send and receive buffers, where --device puts them: the daemon's shared host
// segment (hc_mem_alloc, or ncclMemAlloc under --api nccl), or simulated device memory
// (hc_sim_malloc) with a sim stream that every operation and copy is ordered on, as a trainer's
// CUDA stream would be. The checked runs (-c 1) reach device buffers only through copies to and
// from host mirrors (hc_sim_memcpy), never by their host mapping, so the check takes the same way
// in and out that a real GPU's memory needs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/perf_options.h"

namespace hc::bench {

class NcclRank;

class RankBuffers {
 public:
  RankBuffers() = default;
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  ~RankBuffers() { release(); }

  // Allocates a send and a receive buffer of `bytes` each (> 0) and zeroes them; with mirrors,
  // device buffers also get host mirrors for the checked runs. Host buffers come from
  // nccl->memAlloc (ncclMemAlloc) when nccl is not null, else from hc_mem_alloc. On failure *call
  // names the call that failed (nccl->error(), else hc_get_last_error(nullptr), has the detail).
  // Borrowed: nccl outlives this object.
  [[nodiscard]] hc_status_t allocate(const BufferPlace& place, size_t bytes, bool mirrors,
                                     NcclRank* nccl, const char** call);
  // Frees in reverse order of allocate(); the stream is drained first. Safe to call twice.
  void release();

  void* send() const { return send_; }
  void* recv() const { return recv_; }
  // The stream to pass to every operation: null for host buffers.
  hc_stream_t stream() const { return stream_; }

  // The host memory that stands for the `bytes` at p, a pointer into send() or recv(): p itself
  // for host buffers, the same offset in the mirror for device buffers.
  char* hostView(const void* p);
  // Device buffers: the mirror's bytes at p go to the device, in stream order. Host: nothing.
  [[nodiscard]] hc_status_t upload(const void* p, size_t bytes);
  // Device buffers: the device's bytes at p come back to the mirror; returns once they have
  // landed. Host: nothing.
  [[nodiscard]] hc_status_t download(const void* p, size_t bytes);
  // Waits for everything on the stream (device buffers); HC_OK at once for host buffers.
  [[nodiscard]] hc_status_t synchronize();

 private:
  BufferPlace place_;
  NcclRank* nccl_ = nullptr;
  size_t bytes_ = 0;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  hc_stream_t stream_ = nullptr;
  std::vector<char> sendMirror_;  // device buffers with checking: host copies of send_, recv_
  std::vector<char> recvMirror_;
};

}  // namespace hc::bench
