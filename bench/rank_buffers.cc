#include "bench/rank_buffers.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bench/perf_api_nccl.h"

namespace hc::bench {

hc_status_t RankBuffers::allocate(const BufferPlace& place, size_t bytes, bool mirrors,
                                  NcclRank* nccl, const char** call) {
  place_ = place;
  nccl_ = nccl;
  bytes_ = bytes;
  hc_status_t st;
  if (place.heap) {
    // Page aligned like a framework's large allocations; the client copies through its segment.
    *call = "aligned_alloc";
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    send_ = std::aligned_alloc(4096, rounded);
    recv_ = std::aligned_alloc(4096, rounded);
    if (send_ == nullptr || recv_ == nullptr) return HC_NO_RESOURCE;
    std::memset(send_, 0, bytes);
    std::memset(recv_, 0, bytes);
    return HC_OK;
  }
  if (!place.sim && nccl != nullptr) {
    *call = "ncclMemAlloc";
    if (!nccl->memAlloc(&send_, bytes) || !nccl->memAlloc(&recv_, bytes)) return HC_INTERNAL;
  } else if (!place.sim) {
    *call = "hc_mem_alloc";
    if ((st = hc_mem_alloc(&send_, bytes)) != HC_OK) return st;
    if ((st = hc_mem_alloc(&recv_, bytes)) != HC_OK) return st;
  }
  if (!place.sim) {
    // Touched once here: first touch runs far below memory bandwidth and must not be timed.
    std::memset(send_, 0, bytes);
    std::memset(recv_, 0, bytes);
    return HC_OK;
  }
  *call = "hc_sim_malloc";
  if ((st = hc_sim_malloc(&send_, bytes, place.vendor, place.index)) != HC_OK) return st;
  if ((st = hc_sim_malloc(&recv_, bytes, place.vendor, place.index)) != HC_OK) return st;
  *call = "hc_sim_stream_create";
  if ((st = hc_sim_stream_create(&stream_, place.vendor, place.index)) != HC_OK) return st;
  // Zeroed by copies, as a GPU's memory would be: the host mapping is the simulator's business.
  std::vector<char> zeros(bytes, 0);
  if (mirrors) {
    sendMirror_.assign(bytes, 0);
    recvMirror_.assign(bytes, 0);
  }
  *call = "hc_sim_memcpy";
  if ((st = hc_sim_memcpy(send_, zeros.data(), bytes, stream_)) != HC_OK) return st;
  if ((st = hc_sim_memcpy(recv_, zeros.data(), bytes, stream_)) != HC_OK) return st;
  *call = "hc_sim_stream_synchronize";
  return hc_sim_stream_synchronize(stream_);  // before `zeros` goes
}

void RankBuffers::release() {
  if (place_.heap) {
    std::free(recv_);
    std::free(send_);
  } else if (!place_.sim && nccl_ != nullptr) {
    if (recv_ != nullptr) nccl_->memFree(recv_);
    if (send_ != nullptr) nccl_->memFree(send_);
  } else if (!place_.sim) {
    if (recv_ != nullptr) hc_mem_free(recv_);
    if (send_ != nullptr) hc_mem_free(send_);
  } else {
    // The process is about to exit: a failure here has nobody left to tell.
    if (stream_ != nullptr) (void)hc_sim_stream_destroy(stream_);
    if (recv_ != nullptr) (void)hc_sim_free(recv_);
    if (send_ != nullptr) (void)hc_sim_free(send_);
  }
  stream_ = nullptr;
  recv_ = send_ = nullptr;
}

char* RankBuffers::hostView(const void* p) {
  if (!place_.sim) return static_cast<char*>(const_cast<void*>(p));
  // Compared as integers: the two buffers are separate allocations.
  const auto at = reinterpret_cast<uintptr_t>(p);
  const auto s = reinterpret_cast<uintptr_t>(send_);
  if (at >= s && at <= s + bytes_) return sendMirror_.data() + (at - s);
  return recvMirror_.data() + (at - reinterpret_cast<uintptr_t>(recv_));
}

hc_status_t RankBuffers::upload(const void* p, size_t bytes) {
  if (!place_.sim || bytes == 0) return HC_OK;
  return hc_sim_memcpy(const_cast<void*>(p), hostView(p), bytes, stream_);
}

hc_status_t RankBuffers::download(const void* p, size_t bytes) {
  if (!place_.sim || bytes == 0) return HC_OK;
  if (hc_status_t st = hc_sim_memcpy(hostView(p), p, bytes, stream_); st != HC_OK) return st;
  return hc_sim_stream_synchronize(stream_);
}

hc_status_t RankBuffers::synchronize() {
  return stream_ != nullptr ? hc_sim_stream_synchronize(stream_) : HC_OK;
}

}  // namespace hc::bench
