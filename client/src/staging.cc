#include "client/src/staging.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "client/src/connection.h"
#include "common/ipc/protocol.h"

namespace hc::client {
namespace {

// Cache limits: enough for the few buffers a training loop cycles through, small next to the
// segment (1 GiB by default).
constexpr size_t kMaxIdleBlocks = 16;
constexpr uint64_t kMaxIdleBytes = 256ull << 20;
// Up to this size blocks come in powers of two, so a buffer that grows a little still fits the
// cached block; above it in 2 MiB steps, so a large buffer wastes little of the heap.
constexpr uint64_t kPowerOfTwoLimit = 64ull << 20;
constexpr uint64_t kLargeStep = 2ull << 20;

uint64_t blockBytesFor(uint64_t bytes) {
  if (bytes <= kPowerOfTwoLimit)
    return std::bit_ceil(std::max<uint64_t>(bytes, ipc::kHeapAlignment));
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

Result<SegmentBlock> StagingPool::acquire(uint64_t bytes) {
  const uint64_t want = blockBytesFor(bytes);
  std::vector<SegmentBlock> surplus;
  SegmentBlock found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    surplus.swap(surplus_);
    // The smallest idle block that fits, unless it would waste more than half of itself.
    auto it = idle_.lower_bound(want);
    if (it != idle_.end() && it->first / 2 <= want) {
      found = it->second;
      idleBytes_ -= it->first;
      idle_.erase(it);
    }
  }
  freeAll(std::move(surplus));
  if (found.ptr != nullptr) return found;

  auto block = conn_->allocBlock(want);
  if (!block.isOk() && !conn_->dead()) {
    // The heap may be full of idle staging blocks of other sizes: give them back and retry.
    trim();
    block = conn_->allocBlock(want);
  }
  if (!block.isOk()) {
    return Status{block.status().code(), "staging " + std::to_string(bytes) +
                                             " bytes of host memory that is not from " +
                                             "hc_mem_alloc failed: " + block.status().message()};
  }
  return block;
}

void StagingPool::release(const SegmentBlock& block) {
  if (conn_->dead()) return;  // the segment is gone with the daemon
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_.size() < kMaxIdleBlocks && idleBytes_ + block.bytes <= kMaxIdleBytes) {
    idle_.emplace(block.bytes, block);
    idleBytes_ += block.bytes;
  } else {
    surplus_.push_back(block);
  }
}

void StagingPool::trim(bool wait) {
  std::vector<SegmentBlock> blocks;
  {
    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    if (wait) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return;
    }
    for (auto& [bytes, block] : idle_) blocks.push_back(block);
    idle_.clear();
    idleBytes_ = 0;
    blocks.insert(blocks.end(), surplus_.begin(), surplus_.end());
    surplus_.clear();
  }
  freeAll(std::move(blocks));
}

void StagingPool::freeAll(std::vector<SegmentBlock> blocks) {
  if (conn_->dead()) return;
  // A failure leaves the block allocated until the connection closes; nothing else to do.
  for (const SegmentBlock& b : blocks) (void)conn_->memFree(b.ptr);
}

Staging::Staging(StagingPool* pool, const void* send, uint64_t sendBytes, void* recv,
                 uint64_t recvBytes)
    : pool_(pool), send_(send), sendBytes_(sendBytes), recv_(recv), recvBytes_(recvBytes) {
  if (recvBytes_ > 0) outRanges_.emplace_back(0, recvBytes_);
  auto s = reinterpret_cast<uintptr_t>(send);
  auto r = reinterpret_cast<uintptr_t>(recv);
  if (sendBytes_ > 0 && recvBytes_ > 0 && s < r + recvBytes_ && r < s + sendBytes_) {
    // Overlapping (in place): one region spanning both, each at its distance from the start.
    uintptr_t lo = std::min(s, r);
    sendOffset_ = s - lo;
    recvOffset_ = r - lo;
    totalBytes_ = std::max(s + sendBytes_, r + recvBytes_) - lo;
  } else {
    // Apart: the recv region starts on its own page, as an hc_mem_alloc buffer would.
    recvOffset_ = sendBytes_ > 0 ? alignUp(sendBytes_, ipc::kHeapAlignment) : 0;
    totalBytes_ = recvOffset_ + recvBytes_;
  }
}

Staging::~Staging() {
  if (writes_ != nullptr) writes_->remove(this);
  if (block_.ptr != nullptr) pool_->release(block_);
}

Status Staging::prepare() {
  if (prepared()) return okStatus();
  auto block = pool_->acquire(totalBytes_);
  if (!block.isOk()) return block.status();
  block_ = *block;
  if (sendBytes_ > 0) {
    std::memcpy(static_cast<uint8_t*>(block_.ptr) + sendOffset_, send_, sendBytes_);
  }
  return okStatus();
}

bool Staging::mustWaitFor(const PendingWrites& writes) const {
  auto s = reinterpret_cast<uintptr_t>(send_);
  auto r = reinterpret_cast<uintptr_t>(recv_);
  return (sendBytes_ > 0 && writes.overlaps(s, s + sendBytes_)) ||
         (recvBytes_ > 0 && writes.overlaps(r, r + recvBytes_));
}

void Staging::trackWrites(PendingWrites* writes) {
  if (writes_ != nullptr || outRanges_.empty()) return;
  writes_ = writes;
  auto r = reinterpret_cast<uintptr_t>(recv_);
  for (const auto& [offset, bytes] : outRanges_) writes_->add(this, r + offset, r + offset + bytes);
}

void Staging::settle(bool succeeded) {
  if (succeeded && prepared()) {
    const uint8_t* from = static_cast<const uint8_t*>(block_.ptr) + recvOffset_;
    for (const auto& [offset, bytes] : outRanges_) {
      std::memcpy(static_cast<uint8_t*>(recv_) + offset, from + offset, bytes);
    }
  }
  if (writes_ != nullptr) writes_->remove(this);
  writes_ = nullptr;
}

void PendingWrites::add(const void* owner, uintptr_t begin, uintptr_t end) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_.push_back({owner, begin, end});
}

void PendingWrites::remove(const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(ranges_, [owner](const Range& r) { return r.owner == owner; });
}

bool PendingWrites::overlaps(uintptr_t begin, uintptr_t end) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Range& r : ranges_) {
    if (begin < r.end && r.begin < end) return true;
  }
  return false;
}

}  // namespace hc::client
