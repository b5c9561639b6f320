// WorkerDevice on a CUDA GPU, through the CUDA runtime API: hc_gpu_worker only. The runtime is
// linked statically and opens the driver (libcuda.so.1) itself when the device is opened; the
// client library then finds that driver in the process, as it finds a framework's. Compiled by
// the host compiler: no kernels.
//
// Ordering: every copy, host function and collective the worker issues for a case goes on one
// stream of its own, in issue order; the stream runs them one after another, and the client
// library's stream steps (submit when reached, wait on the done flag) sit among them. The worker's
// streams are non-blocking (cudaStreamNonBlocking), so that nothing on the legacy default stream
// serializes with them. Copies with a null stream run on a private stream of the same kind and
// are waited for at once: they look at memory while the other streams may still be busy.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "tests/integration/worker_device.h"

namespace hc::integ {
namespace {

// Host functions run on a runtime thread and must not call CUDA.
void sleepOnStream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

void raiseFlag(void* flag) { static_cast<std::atomic<uint32_t>*>(flag)->store(1); }

cudaStream_t cudaStreamOf(hc_stream_t stream) { return static_cast<cudaStream_t>(stream); }

class CudaDevice final : public WorkerDevice {
 public:
  explicit CudaDevice(int index) : index_(index), name_("cuda:" + std::to_string(index)) {}
  ~CudaDevice() override {
    if (peek_ != nullptr) (void)cudaStreamDestroy(peek_);
  }

  // Makes the device current on this thread, creates its context and the private stream.
  DeviceStatus open() {
    DeviceStatus s = check(cudaSetDevice(index_), "cudaSetDevice");
    if (s.ok()) s = check(cudaFree(nullptr), "cudaFree(nullptr) (creating the context)");
    if (s.ok())
      s = check(cudaStreamCreateWithFlags(&peek_, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }

  // WorkerDevice
  const std::string& name() const override { return name_; }
  bool reportsFreeMemory() const override { return true; }
  DeviceStatus allocate(size_t bytes, void** ptr) override {
    return check(cudaMalloc(ptr, bytes), "cudaMalloc", bytes);
  }
  void release(void* ptr) override {
    if (ptr != nullptr) (void)cudaFree(ptr);
  }
  DeviceStatus allocateHost(size_t bytes, void** ptr) override {
    return check(cudaMallocHost(ptr, bytes), "cudaMallocHost", bytes);
  }
  void releaseHost(void* ptr) override {
    if (ptr != nullptr) (void)cudaFreeHost(ptr);
  }
  DeviceStatus createStream(hc_stream_t* stream) override {
    cudaStream_t s = nullptr;
    DeviceStatus status =
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (status.ok()) *stream = s;
    return status;
  }
  void destroyStream(hc_stream_t stream) override {
    (void)cudaStreamSynchronize(cudaStreamOf(stream));
    (void)cudaStreamDestroy(cudaStreamOf(stream));
  }
  DeviceStatus synchronize(hc_stream_t stream) override {
    return check(cudaStreamSynchronize(cudaStreamOf(stream)), "cudaStreamSynchronize");
  }
  DeviceStatus copy(void* dst, const void* src, size_t bytes, hc_stream_t stream) override {
    if (bytes == 0) return {};
    // Unified addressing tells host from device memory (cudaMemcpyDefault).
    cudaStream_t on = stream != nullptr ? cudaStreamOf(stream) : peek_;
    DeviceStatus s =
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, on), "cudaMemcpyAsync", bytes);
    if (s.ok() && stream == nullptr) s = check(cudaStreamSynchronize(on), "cudaStreamSynchronize");
    return s;
  }
  DeviceStatus occupyStream(hc_stream_t stream, int ms) override {
    return check(cudaLaunchHostFunc(cudaStreamOf(stream), sleepOnStream,
                                    reinterpret_cast<void*>(static_cast<intptr_t>(ms))),
                 "cudaLaunchHostFunc");
  }
  DeviceStatus signalOnStream(hc_stream_t stream, std::atomic<uint32_t>* flag) override {
    return check(cudaLaunchHostFunc(cudaStreamOf(stream), raiseFlag, flag), "cudaLaunchHostFunc");
  }
  DeviceStatus memoryInfo(size_t* freeBytes, size_t* totalBytes) override {
    return check(cudaMemGetInfo(freeBytes, totalBytes), "cudaMemGetInfo");
  }

 private:
  DeviceStatus check(cudaError_t rc, const char* call, size_t bytes = 0) const {
    if (rc == cudaSuccess) return {};
    std::string what = name_ + ": " + call;
    if (bytes != 0) what += "(" + std::to_string(bytes) + " bytes)";
    return {HC_DEVICE_ERROR,
            what + " failed: " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")"};
  }

  const int index_;
  const std::string name_;
  cudaStream_t peek_ = nullptr;  // copies with a null stream
};

}  // namespace

bool workerHasCuda() { return true; }

WorkerDevicePtr makeCudaDevice(const DeviceChoice& choice, DeviceStatus* error) {
  auto device = std::make_unique<CudaDevice>(choice.index);
  *error = device->open();
  if (!error->ok()) return nullptr;
  return device;
}

}  // namespace hc::integ
