// The device a rank worker's buffers live on, behind one small interface, so that every mode runs
// the same steps on a simulated device (hetero_comm/hc_sim.h) in CI as on a CUDA GPU when one is
// lent: memory, streams, and copies between host and device. The worker never reads or writes
// device memory from the host (GPU memory is not host-mapped, sim memory is): it prepares data in
// host shadows and copies them in and out on a stream (MirroredBuffer).
//
// Implementations: worker_device_sim.cc (hc_sim_*) in every worker; worker_device_cuda.cc (the
// CUDA runtime API, linked statically) in hc_gpu_worker only, worker_device_nocuda.cc in
// hc_rank_worker.
//
// The client library looks for the CUDA driver once, when the first operation names memory outside
// its segment, and finds it only if the process has loaded it by then: open the device before
// posting any such operation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hetero_comm/hc.h"
#include "hetero_comm/hc_sim.h"

namespace hc::integ {

// Where a runner's buffers live: host memory, a simulated device, or a CUDA device.
struct DeviceChoice {
  enum class Kind { Host, Sim, Cuda };
  Kind kind = Kind::Host;
  hc_sim_vendor_t vendor = HC_SIM_NVIDIA;  // Sim only
  int index = 0;
  bool onDevice() const { return kind != Kind::Host; }
};
// "" (host), "sim:nvidia:0" / "sim:amd:1", or "cuda:0"; false for anything else.
[[nodiscard]] bool parseDeviceChoice(const std::string& text, DeviceChoice* out);
// Whether this worker can open devices of that kind; if not, *why says so.
[[nodiscard]] bool workerSupports(const DeviceChoice& choice, std::string* why);

// The outcome of a device call: HC_OK, or a status (HC_DEVICE_ERROR for the runtime's own
// failures) with the runtime's words.
struct DeviceStatus {
  hc_status_t status = HC_OK;
  std::string error;
  bool ok() const { return status == HC_OK; }
};

// Threads: used by the thread that opened it (CUDA's current device is per thread). Streams and
// allocations are released before the device.
class WorkerDevice {
 public:
  virtual ~WorkerDevice() = default;

  // "sim:nvidia:0", "cuda:0".
  virtual const std::string& name() const = 0;
  // Whether memoryInfo() answers: a CUDA device counts its memory; a sim device has none of its
  // own (its allocations are host memory).
  virtual bool reportsFreeMemory() const = 0;

  [[nodiscard]] virtual DeviceStatus allocate(size_t bytes, void** ptr) = 0;
  virtual void release(void* ptr) = 0;
  // Host memory for the shadows of device buffers (CUDA: pinned, so that stream copies run
  // without the CPU).
  [[nodiscard]] virtual DeviceStatus allocateHost(size_t bytes, void** ptr) = 0;
  virtual void releaseHost(void* ptr) = 0;

  [[nodiscard]] virtual DeviceStatus createStream(hc_stream_t* stream) = 0;
  // Waits for the stream's work, then destroys it.
  virtual void destroyStream(hc_stream_t stream) = 0;
  // Waits for the stream's work; its error if some of it failed.
  [[nodiscard]] virtual DeviceStatus synchronize(hc_stream_t stream) = 0;

  // Copies `bytes` between any two of host and device memory. With a stream: in its order,
  // returning at once (both buffers stay valid, and the source unchanged, until the stream passed
  // the copy). With a null stream: now and synchronously, after the work of no stream: a look at
  // what the memory holds at this moment, while streams may still be busy.
  [[nodiscard]] virtual DeviceStatus copy(void* dst, const void* src, size_t bytes,
                                          hc_stream_t stream) = 0;

  // Enqueues work that keeps the stream busy for about `ms` while the CPU goes on (CUDA: a host
  // function that sleeps; sim: device-to-device copies, as many as a timed one says fill `ms`).
  [[nodiscard]] virtual DeviceStatus occupyStream(hc_stream_t stream, int ms) = 0;
  // Sets *flag to 1 once the stream's earlier work has completed. *flag outlives the stream's
  // work.
  [[nodiscard]] virtual DeviceStatus signalOnStream(hc_stream_t stream,
                                                    std::atomic<uint32_t>* flag) = 0;
  // Free and total bytes of the device (cudaMemGetInfo); only where reportsFreeMemory().
  [[nodiscard]] virtual DeviceStatus memoryInfo(size_t* freeBytes, size_t* totalBytes) = 0;
};
using WorkerDevicePtr = std::unique_ptr<WorkerDevice>;

// Opens the device of a Sim or Cuda choice; null (and *error set) when it cannot be opened, or
// when this worker was built without CUDA.
WorkerDevicePtr makeWorkerDevice(const DeviceChoice& choice, DeviceStatus* error);
// Each implementation's own half (worker_device_sim.cc, worker_device_cuda.cc or _nocuda.cc).
WorkerDevicePtr makeSimDevice(const DeviceChoice& choice, DeviceStatus* error);
WorkerDevicePtr makeCudaDevice(const DeviceChoice& choice, DeviceStatus* error);
bool workerHasCuda();

// The --device of a mode, opened, or after printing "error ..." false. Host memory ("") leaves
// *out null, and is an error only when `required`.
[[nodiscard]] bool openModeDevice(const std::string& text, bool required, WorkerDevicePtr* out);

// Device memory and a host shadow of the same size, which the worker fills and checks: the two
// meet only through copies. Without a device, one hc_mem_alloc buffer is both and the copies do
// nothing, so host runs keep their zero-copy path. Borrowed: the device outlives the buffer.
class MirroredBuffer {
 public:
  MirroredBuffer() = default;
  ~MirroredBuffer() { reset(); }
  MirroredBuffer(const MirroredBuffer&) = delete;
  MirroredBuffer& operator=(const MirroredBuffer&) = delete;

  // `device` null: host memory. Frees what the buffer held before.
  [[nodiscard]] DeviceStatus allocate(WorkerDevice* device, size_t bytes);
  // Frees both halves; the buffer is empty again.
  void reset();
  size_t bytes() const { return bytes_; }
  uint8_t* shadow() const { return shadow_; }
  uint8_t* device() const { return device_; }
  template <typename T>
  T* shadowAs() const {
    return reinterpret_cast<T*>(shadow_);
  }
  template <typename T>
  T* deviceAs() const {
    return reinterpret_cast<T*>(device_);
  }
  bool holds(const void* inShadow) const;
  // The device address of a pointer into the shadow (an argument prepared against the shadow).
  void* deviceAddress(const void* inShadow) const;

  // The first `bytes` (all when 0) from the shadow to the device, or back; see WorkerDevice::copy
  // for the stream.
  [[nodiscard]] DeviceStatus toDevice(hc_stream_t stream, size_t bytes = 0);
  [[nodiscard]] DeviceStatus toHost(hc_stream_t stream, size_t bytes = 0);

 private:
  WorkerDevice* owner_ = nullptr;
  uint8_t* device_ = nullptr;
  uint8_t* shadow_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace hc::integ
