// What the GPU modes of the rank worker share (worker_gpu_modes.cc, worker_gpu_perf.cc): one
// rank's device, stream and allreduce buffers, and values whose sums are exact in every dtype
// they use.
#pragma once

#include <cstdint>
#include <string>

#include "tests/integration/worker_device.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {

// One rank of a GPU mode: the --device, a stream of it, and a send and a receive buffer.
struct GpuRank {
  WorkerDevicePtr device;
  hc_stream_t stream = nullptr;
  MirroredBuffer send;
  MirroredBuffer recv;

  GpuRank() = default;
  // The stream goes first, then the buffers, then the device (reverse declaration order).
  ~GpuRank() {
    if (stream != nullptr) device->destroyStream(stream);
  }
  GpuRank(const GpuRank&) = delete;
  GpuRank& operator=(const GpuRank&) = delete;

  // Opens --device (required), a stream, and `bytes` each way; false after printing "error ...".
  [[nodiscard]] bool open(const WorkerOptions& o, size_t bytes);
};

// Prints "error <what>: <device's words>" and returns false when s failed.
bool deviceOk(const DeviceStatus& s, const char* what);

// Rank r's element i: small integers, so that sums over ranks are exact in int32 and float.
inline int32_t allreduceInput(int rank, uint64_t i) {
  return static_cast<int32_t>(i % 61) + 1 + rank;
}
inline int64_t allreduceSum(int nranks, uint64_t i) {
  int64_t sum = 0;
  for (int r = 0; r < nranks; ++r) sum += allreduceInput(r, i);
  return sum;
}

// Fills the shadows for a sum allreduce of `count` T: the inputs, and -1 where results go.
template <typename T>
void fillAllreduce(GpuRank& g, int rank, uint64_t count) {
  T* send = g.send.shadowAs<T>();
  T* recv = g.recv.shadowAs<T>();
  for (uint64_t i = 0; i < count; ++i) send[i] = static_cast<T>(allreduceInput(rank, i));
  for (uint64_t i = 0; i < count; ++i) recv[i] = static_cast<T>(-1);
}

// Wrong elements of the receive shadow after a sum allreduce of `count` T.
template <typename T>
uint64_t wrongAllreduce(const GpuRank& g, int nranks, uint64_t count) {
  const T* recv = g.recv.shadowAs<T>();
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (recv[i] != static_cast<T>(allreduceSum(nranks, i))) ++wrong;
  }
  return wrong;
}

// A verified sum allreduce of `count` T on the rank's stream with a request: shadows in, the op,
// results out, then the stream and the request. Returns its status (a failed device call prints
// why); adds wrong elements to *wrong.
hc_status_t checkedDeviceAllreduce(hc_comm_t comm, const WorkerOptions& o, GpuRank& g,
                                   hc_dtype_t dtype, uint64_t count, uint64_t* wrong);

}  // namespace hc::integ
