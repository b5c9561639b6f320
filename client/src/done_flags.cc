#include "client/src/done_flags.h"

#include "client/src/connection.h"

namespace hc::client {

Result<DoneSlot> DoneFlagPool::acquire(DeviceRuntime* runtime) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) {
    // One page holds 256 slots: more than the operations one process keeps in flight.
    auto page = conn_->allocBlock(ipc::kHeapAlignment);
    if (!page.isOk()) return page.status();
    pages_.push_back(*page);
    for (uint64_t at = 0; at + kDoneSlotBytes <= page->bytes; at += kDoneSlotBytes) {
      free_.push_back({reinterpret_cast<ipc::DoneFlag*>(static_cast<uint8_t*>(page->ptr) + at),
                       page->offset + at});
    }
  }
  DoneSlot slot = free_.back();
  const SegmentBlock* page = nullptr;
  for (const SegmentBlock& p : pages_) {
    if (slot.offset >= p.offset && slot.offset < p.offset + p.bytes) page = &p;
  }
  HC_RETURN_IF_ERROR(registerPage(runtime, *page));
  free_.pop_back();
  slot.flag->status = 0;
  slot.flag->value.store(0, std::memory_order_relaxed);
  return slot;
}

void DoneFlagPool::release(const DoneSlot& slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(slot);
}

Status DoneFlagPool::registerPage(DeviceRuntime* runtime, const SegmentBlock& page) {
  if (registered_.count({runtime, page.offset}) != 0) return okStatus();
  HC_RETURN_IF_ERROR(runtime->registerHostMemory(page.ptr, page.bytes));
  registered_.insert({runtime, page.offset});
  return okStatus();
}

}  // namespace hc::client
