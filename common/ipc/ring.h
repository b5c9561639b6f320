// Single-producer single-consumer rings over the shared segment, and the signals that wake the
// other side. The handshake and its fences are described on SegmentHeader in protocol.h.
// Depends on protocol.h and libc.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "common/ipc/protocol.h"

namespace hc::ipc {

enum class PopResult { Ok, Empty, Corrupt };

template <typename Entry>
class RingView {
 public:
  RingView() = default;
  RingView(Entry* slots, uint32_t entries, std::atomic<uint32_t>* head, std::atomic<uint32_t>* tail)
      : slots_(slots), mask_(entries - 1), head_(head), tail_(tail) {}

  // Producer side. Returns false when the ring is full. Publishes with release order.
  bool push(const Entry& e) {
    uint32_t tail = tail_->load(std::memory_order_relaxed);
    uint32_t head = head_->load(std::memory_order_acquire);
    if (tail - head > mask_) return false;
    std::memcpy(static_cast<void*>(&slots_[tail & mask_]), &e, sizeof(Entry));
    tail_->store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer side. Copies one entry out. Corrupt when the producer published an impossible tail
  // (more entries than the ring holds): a peer that scribbled on the segment.
  PopResult pop(Entry* out) {
    uint32_t head = head_->load(std::memory_order_relaxed);
    uint32_t tail = tail_->load(std::memory_order_acquire);
    if (tail == head) return PopResult::Empty;
    if (tail - head > mask_ + 1) return PopResult::Corrupt;
    std::memcpy(out, static_cast<const void*>(&slots_[head & mask_]), sizeof(Entry));
    head_->store(head + 1, std::memory_order_release);
    return PopResult::Ok;
  }

  bool empty() const {
    return tail_->load(std::memory_order_acquire) == head_->load(std::memory_order_relaxed);
  }
  // Producer side: no room for another entry.
  bool full() const {
    return tail_->load(std::memory_order_relaxed) - head_->load(std::memory_order_acquire) > mask_;
  }
  uint32_t capacity() const { return mask_ + 1; }

 private:
  Entry* slots_ = nullptr;
  uint32_t mask_ = 0;
  std::atomic<uint32_t>* head_ = nullptr;
  std::atomic<uint32_t>* tail_ = nullptr;
};

// Pointers into one mapped segment; validates the header the daemon wrote.
struct SegmentView {
  SegmentHeader* header = nullptr;
  RingView<SubmitEntry> submit;
  RingView<CompletionEntry> completion;
  uint8_t* base = nullptr;
  uint64_t bytes = 0;

  static SegmentView over(void* base, uint64_t bytes, uint32_t entries);
};

inline SegmentView SegmentView::over(void* base, uint64_t bytes, uint32_t entries) {
  SegmentView v;
  v.base = static_cast<uint8_t*>(base);
  v.bytes = bytes;
  v.header = static_cast<SegmentHeader*>(base);
  SegmentLayout l = segmentLayout(bytes, entries);
  v.submit = RingView<SubmitEntry>(reinterpret_cast<SubmitEntry*>(v.base + l.submitOffset), entries,
                                   &v.header->submitHead, &v.header->submitTail);
  v.completion = RingView<CompletionEntry>(
      reinterpret_cast<CompletionEntry*>(v.base + l.completionOffset), entries,
      &v.header->completionHead, &v.header->completionTail);
  return v;
}

// Shared (not FUTEX_PRIVATE) futex calls on a word of a MAP_SHARED mapping.
// Waits while *word == expected, at most timeoutNs (< 0: no limit). Returns false on timeout.
bool futexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeoutNs);
void futexWake(std::atomic<uint32_t>* word, int count);

// Client side, after pushing submissions: ring the daemon's eventfd only if it sleeps.
void wakeDaemonIfSleeping(SegmentHeader* header, int daemonEventFd);
// Completes a stream-ordered operation's done flag (protocol.h, DoneFlag): status, then value
// with release, then wakes its waiters. The daemon calls it on completion, the client on every
// local failure; a flag already set is left as it is, so the daemon's status stands.
void signalDone(DoneFlag* flag, int32_t status);

// Daemon side, after pushing completions: bump the futex word and wake sleeping client threads.
void wakeClientIfSleeping(SegmentHeader* header);

}  // namespace hc::ipc
