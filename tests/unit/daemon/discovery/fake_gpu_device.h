// A Device that only describes itself: enough for the inventory, which reads DeviceInfo and never
// runs work. Every operation fails with DeviceError so that a test that tried would notice.
#pragma once

#include <memory>
#include <string>

#include "daemon/device/device.h"
#include "daemon/device/registry.h"

namespace hc::discovery::testing {

class DescribedDevice final : public device::Device {
 public:
  explicit DescribedDevice(device::DeviceInfo info) : info_(std::move(info)) {}

  // hc::device::Device
  const device::DeviceInfo& info() const override { return info_; }
  const device::Capabilities& capabilities() const override { return caps_; }
  Result<device::ImportedBuffer> importBuffer(const device::BufferHandle&) override {
    return unused();
  }
  Status releaseBuffer(device::ImportedBuffer&) override { return unused(); }
  Result<void*> allocPinned(size_t) override { return unused(); }
  Status freePinned(void*) override { return unused(); }
  Result<void*> allocDevice(size_t) override { return unused(); }
  Status freeDevice(void*) override { return unused(); }
  Result<device::StreamId> createStream() override { return unused(); }
  Status destroyStream(device::StreamId) override { return unused(); }
  Status copyAsync(device::StreamId, void*, const void*, size_t) override { return unused(); }
  Status reduceAsync(device::StreamId, const device::ReduceWork&) override { return unused(); }
  Result<device::EventId> recordEvent(device::StreamId) override { return unused(); }
  Result<bool> queryEvent(device::EventId) override { return unused(); }
  Status releaseEvent(device::EventId) override { return unused(); }
  Status synchronize(device::StreamId) override { return unused(); }

 private:
  static Status unused() { return {Code::DeviceError, "described device runs no work"}; }

  device::DeviceInfo info_;
  device::Capabilities caps_;
};

inline device::DevicePtr describedDevice(device::Vendor vendor, int index, std::string backend,
                                         std::string model, uint64_t memoryBytes,
                                         std::string pciBusId) {
  device::DeviceInfo info;
  info.index = index;
  info.vendor = vendor;
  info.backend = std::move(backend);
  info.model = std::move(model);
  info.memoryBytes = memoryBytes;
  info.pciBusId = std::move(pciBusId);
  return std::make_unique<DescribedDevice>(std::move(info));
}

}  // namespace hc::discovery::testing
