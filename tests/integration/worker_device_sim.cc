// WorkerDevice on a simulated device (hetero_comm/hc_sim.h). Sim memory happens to be host-mapped,
// but nothing here relies on it: every byte moves through hc_sim_memcpy, as it would through
// cudaMemcpyAsync.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "tests/integration/worker_device.h"

namespace hc::integ {
namespace {

// The scratch buffers that keep a stream busy (occupyStream): big enough that one copy takes
// milliseconds, small enough for a test machine.
constexpr size_t kScratchBytes = 32u << 20;
// Upper bound on the copies of one occupyStream, whatever the timed copy said.
constexpr int kMaxOccupyCopies = 4096;

class SimDevice final : public WorkerDevice {
 public:
  SimDevice(hc_sim_vendor_t vendor, int index)
      : vendor_(vendor),
        index_(index),
        name_(std::string("sim:") + (vendor == HC_SIM_AMD ? "amd:" : "nvidia:") +
              std::to_string(index)) {}
  ~SimDevice() override {
    (void)hc_sim_free(scratch_[0]);
    (void)hc_sim_free(scratch_[1]);
    (void)hc_sim_free(one_);
  }

  // WorkerDevice
  const std::string& name() const override { return name_; }
  bool reportsFreeMemory() const override { return false; }
  DeviceStatus allocate(size_t bytes, void** ptr) override {
    return check(hc_sim_malloc(ptr, bytes, vendor_, index_), "hc_sim_malloc");
  }
  void release(void* ptr) override { (void)hc_sim_free(ptr); }
  DeviceStatus allocateHost(size_t bytes, void** ptr) override {
    // 64-byte aligned like the device allocations, so that every dtype's elements are aligned.
    *ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (*ptr != nullptr) return {};
    return {HC_NO_RESOURCE, "aligned_alloc(" + std::to_string(bytes) + ") failed"};
  }
  void releaseHost(void* ptr) override { std::free(ptr); }
  DeviceStatus createStream(hc_stream_t* stream) override {
    return check(hc_sim_stream_create(stream, vendor_, index_), "hc_sim_stream_create");
  }
  void destroyStream(hc_stream_t stream) override { (void)hc_sim_stream_destroy(stream); }
  DeviceStatus synchronize(hc_stream_t stream) override {
    return check(hc_sim_stream_synchronize(stream), "hc_sim_stream_synchronize");
  }
  DeviceStatus copy(void* dst, const void* src, size_t bytes, hc_stream_t stream) override {
    return check(hc_sim_memcpy(dst, src, bytes, stream), "hc_sim_memcpy");
  }
  DeviceStatus occupyStream(hc_stream_t stream, int ms) override;
  DeviceStatus signalOnStream(hc_stream_t stream, std::atomic<uint32_t>* flag) override;
  DeviceStatus memoryInfo(size_t*, size_t*) override {
    return {HC_INVALID_ARGUMENT, name_ + " has no memory of its own to count"};
  }

 private:
  DeviceStatus check(hc_status_t rc, const char* call) const {
    if (rc == HC_OK) return {};
    return {rc, name_ + ": " + call + ": " + hc_get_last_error(nullptr)};
  }

  const hc_sim_vendor_t vendor_;
  const int index_;
  const std::string name_;
  void* scratch_[2] = {nullptr, nullptr};  // occupyStream's copies, from first use
  double copyMs_ = 0;                      // what one of them took, timed once
  void* one_ = nullptr;                    // signalOnStream's source: a word holding 1
};

DeviceStatus SimDevice::occupyStream(hc_stream_t stream, int ms) {
  if (scratch_[0] == nullptr) {
    for (void*& p : scratch_) {
      if (DeviceStatus s = allocate(kScratchBytes, &p); !s.ok()) return s;
    }
    // The sim offers no host function to put on a stream, only copies: time one (after a first
    // that faults the pages in) to know how many fill `ms`.
    for (int i = 0; i < 2; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (DeviceStatus s = copy(scratch_[1], scratch_[0], kScratchBytes, nullptr); !s.ok()) {
        return s;
      }
      copyMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    }
  }
  const int copies =
      std::min(kMaxOccupyCopies, std::max(1, static_cast<int>(std::ceil(ms / copyMs_))));
  for (int i = 0; i < copies; ++i) {
    if (DeviceStatus s = copy(scratch_[i % 2], scratch_[1 - i % 2], kScratchBytes, stream);
        !s.ok()) {
      return s;
    }
  }
  return {};
}

DeviceStatus SimDevice::signalOnStream(hc_stream_t stream, std::atomic<uint32_t>* flag) {
  if (one_ == nullptr) {
    const uint32_t one = 1;
    if (DeviceStatus s = allocate(sizeof(one), &one_); !s.ok()) return s;
    if (DeviceStatus s = copy(one_, &one, sizeof(one), nullptr); !s.ok()) return s;
  }
  // A copy of one aligned word into the flag: the poller's atomic load sees 0 or 1, never a torn
  // value.
  return copy(flag, one_, sizeof(uint32_t), stream);
}

}  // namespace

WorkerDevicePtr makeSimDevice(const DeviceChoice& choice, DeviceStatus*) {
  return std::make_unique<SimDevice>(choice.vendor, choice.index);
}

}  // namespace hc::integ
