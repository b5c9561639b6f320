#include "daemon/staging/device_copier.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace hc::staging {
namespace {

Status copyFailed(const device::Device& d, const Status& why) {
  return Status{Code::DeviceError,
                "copy on " + device::deviceLabel(d.info()) + " failed: " + why.message()};
}

}  // namespace

DeviceCopier::~DeviceCopier() {
  for (auto& [lane, stream] : streams_) {
    [[maybe_unused]] Status s = lane.first->destroyStream(stream);
  }
  for (auto& [device, buffer] : scratch_) {
    [[maybe_unused]] Status s = device->freeDevice(buffer.first);
  }
}

Result<uint8_t*> DeviceCopier::scratch(device::Device* device, uint64_t bytes) {
  auto it = scratch_.find(device);
  if (it != scratch_.end() && it->second.second >= bytes) {
    return static_cast<uint8_t*>(it->second.first);
  }
  if (it != scratch_.end()) {
    [[maybe_unused]] Status s = device->freeDevice(it->second.first);
    scratch_.erase(it);
  }
  auto allocated = device->allocDevice(bytes);
  if (!allocated.isOk()) {
    return Status{allocated.status().code(), "scratch of " + std::to_string(bytes) + " B on " +
                                                 device::deviceLabel(device->info()) + ": " +
                                                 allocated.status().message()};
  }
  spdlog::info("{}: {} B of device memory for reductions across devices",
               device::deviceLabel(device->info()), bytes);
  scratch_[device] = {*allocated, bytes};
  return static_cast<uint8_t*>(*allocated);
}

void DeviceCopier::drop(const Lane& lane) {
  auto it = streams_.find(lane);
  if (it == streams_.end()) return;
  [[maybe_unused]] Status s = lane.first->destroyStream(it->second);
  streams_.erase(it);
}

void DeviceCopier::forget(device::Device* device) {
  drop({device, true});
  drop({device, false});
  pending_.erase({device, true});
  pending_.erase({device, false});
  if (auto it = scratch_.find(device); it != scratch_.end()) {
    [[maybe_unused]] Status s = device->freeDevice(it->second.first);
    scratch_.erase(it);
  }
}

Result<device::StreamId> DeviceCopier::streamFor(const Lane& lane) {
  if (auto it = streams_.find(lane); it != streams_.end()) return it->second;
  auto stream = lane.first->createStream();
  if (!stream.isOk()) return stream.status();
  streams_[lane] = *stream;
  return *stream;
}

Status DeviceCopier::enqueue(device::Device* device, void* dst, const void* src, uint64_t bytes,
                             bool toDevice) {
  if (bytes == 0) return okStatus();
  const Lane lane{device, toDevice};
  auto stream = streamFor(lane);
  if (!stream.isOk()) return copyFailed(*device, stream.status());
  pending_.insert(lane);
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  // Every chunk is enqueued before the first wait: the device's copy engine runs them back to
  // back while this thread sleeps in drain().
  for (uint64_t done = 0; done < bytes; done += chunkBytes_) {
    const uint64_t n = std::min(chunkBytes_, bytes - done);
    Status s = device->copyAsync(*stream, to + done, from + done, n);
    if (!s.isOk()) {
      if (enqueueFailure_.isOk()) enqueueFailure_ = copyFailed(*device, s);
      return enqueueFailure_;
    }
  }
  return okStatus();
}

Status DeviceCopier::drain() {
  Status first = enqueueFailure_;
  enqueueFailure_ = okStatus();
  for (const Lane& lane : pending_) {
    auto it = streams_.find(lane);
    if (it == streams_.end()) continue;
    Status synced = lane.first->synchronize(it->second);
    if (synced.isOk()) continue;
    spdlog::warn("{}: staging copy failed: {}", device::deviceLabel(lane.first->info()),
                 synced.message());
    drop(lane);
    if (first.isOk()) first = copyFailed(*lane.first, synced);
  }
  pending_.clear();
  return first;
}

Status DeviceCopier::copy(device::Device* device, void* dst, const void* src, uint64_t bytes,
                          bool toDevice) {
  Status queued = enqueue(device, dst, src, bytes, toDevice);
  Status landed = drain();
  return queued.isOk() ? landed : queued;
}

Status DeviceCopier::reduce(device::Device* device, const device::ReduceWork& work) {
  auto stream = streamFor({device, false});
  if (!stream.isOk()) return stream.status();
  Status status = device->reduceAsync(*stream, work);
  Status synced = device->synchronize(*stream);
  if (status.isOk()) status = synced;
  if (status.isOk()) return status;
  spdlog::warn("{}: reduction of {} elements failed: {}", device::deviceLabel(device->info()),
               work.count, status.message());
  drop({device, false});
  return Status{Code::DeviceError, "reduction on " + device::deviceLabel(device->info()) +
                                       " failed: " + status.message()};
}

}  // namespace hc::staging
