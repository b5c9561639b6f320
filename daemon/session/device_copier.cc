#include "daemon/session/device_copier.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace hc::session {
namespace {

std::string deviceName(const device::Device& d) {
  return d.info().backend + " " + device::vendorName(d.info().vendor) + ":" +
         std::to_string(d.info().index);
}

}  // namespace

DeviceCopier::~DeviceCopier() {
  for (auto& [device, stream] : streams_) {
    [[maybe_unused]] Status s = device->destroyStream(stream);
  }
}

void DeviceCopier::forget(device::Device* device) {
  auto it = streams_.find(device);
  if (it == streams_.end()) return;
  [[maybe_unused]] Status s = device->destroyStream(it->second);
  streams_.erase(it);
}

Result<device::StreamId> DeviceCopier::streamFor(device::Device* device) {
  if (auto it = streams_.find(device); it != streams_.end()) return it->second;
  auto stream = device->createStream();
  if (!stream.isOk()) return stream.status();
  streams_[device] = *stream;
  return *stream;
}

Status DeviceCopier::copy(device::Device* device, void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return okStatus();
  auto stream = streamFor(device);
  if (!stream.isOk()) return stream.status();
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  Status status = okStatus();
  // Every chunk is enqueued before the first wait: the device's copy engine runs them back to
  // back while this thread sleeps in synchronize().
  for (uint64_t done = 0; done < bytes && status.isOk(); done += chunkBytes_) {
    const uint64_t n = std::min(chunkBytes_, bytes - done);
    status = device->copyAsync(*stream, to + done, from + done, n);
  }
  Status synced = device->synchronize(*stream);
  if (status.isOk()) status = synced;
  if (status.isOk()) return status;
  spdlog::warn("{}: staging copy of {} bytes failed: {}", deviceName(*device), bytes,
               status.message());
  forget(device);
  return Status{Code::DeviceError,
                "copy on " + deviceName(*device) + " failed: " + status.message()};
}

Status DeviceCopier::reduce(device::Device* device, const device::ReduceWork& work) {
  auto stream = streamFor(device);
  if (!stream.isOk()) return stream.status();
  Status status = device->reduceAsync(*stream, work);
  Status synced = device->synchronize(*stream);
  if (status.isOk()) status = synced;
  if (status.isOk()) return status;
  spdlog::warn("{}: reduction of {} elements failed: {}", deviceName(*device), work.count,
               status.message());
  forget(device);
  return Status{Code::DeviceError,
                "reduction on " + deviceName(*device) + " failed: " + status.message()};
}

}  // namespace hc::session
