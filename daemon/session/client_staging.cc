#include "daemon/session/client_staging.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace hc::session {

StagingPool::~StagingPool() {
  for (auto& [bytes, data] : idle_) ::munmap(data, bytes);
}

Result<StagingPool::Buffer> StagingPool::acquire(uint64_t bytes) {
  // Checked before rounding up: bit_ceil of anything above 2^63 is undefined.
  if (bytes > liveCap_) {
    return Status{Code::NoResource, "an operation needs " + std::to_string(bytes) +
                                        " bytes of host staging; session.max_staging_bytes is " +
                                        std::to_string(liveCap_)};
  }
  const uint64_t size = std::bit_ceil(std::max<uint64_t>(bytes, 4096));
  if (liveBytes_ + size > liveCap_) {
    return Status{Code::NoResource,
                  "host staging is in use up to session.max_staging_bytes (" +
                      std::to_string(liveBytes_) + " of " + std::to_string(liveCap_) +
                      " bytes); this operation needs " + std::to_string(size) + " more"};
  }
  auto it = idle_.find(size);
  if (it != idle_.end()) {
    Buffer b{it->second, size};
    idleBytes_ -= size;
    idle_.erase(it);
    liveBytes_ += size;
    return b;
  }
  // MAP_POPULATE: pay for the page faults once, here, rather than inside the reduction.
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return systemError("mmap of a staging buffer", errno);
  liveBytes_ += size;
  return Buffer{static_cast<uint8_t*>(p), size};
}

void StagingPool::release(Buffer b) {
  if (b.data == nullptr) return;
  liveBytes_ -= b.bytes;
  if (idleBytes_ + b.bytes > idleCap_) {
    ::munmap(b.data, b.bytes);
    return;
  }
  idleBytes_ += b.bytes;
  idle_.emplace(b.bytes, b.data);
}

StagedMatch::~StagedMatch() {
  for (auto& p : parts_) pool_->release(p.buffer);
}

Status StagedMatch::transfer(const PendingOp& op, const DeviceRegionPtr& region, bool toClient,
                             uint64_t address, uint8_t* local, uint64_t bytes) {
  if (region != nullptr) {
    uint8_t* remote = region->data() + address;
    return toClient ? copier_->copy(region->device(), remote, local, bytes, true)
                    : copier_->copy(region->device(), local, remote, bytes, false);
  }
  return toClient ? op.processMemory->write(address, local, bytes)
                  : op.processMemory->read(address, local, bytes);
}

Status StagedMatch::stageIn(const std::vector<PendingOp>& ops,
                            std::vector<coll::RankBuffers>& bufs, StagingPool* pool,
                            DeviceCopier* copier) {
  pool_ = pool;
  copier_ = copier;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PendingOp& op = ops[i];
    const auto& s = op.sendRange;
    const auto& r = op.recvRange;
    if (!s.used() && !r.used()) continue;
    // Send and receive ranges of one memory that overlap (the in-place arrangements) share one
    // staging copy, so their relative layout is what the client wrote.
    const bool shared = s.used() && r.used() && op.sendRegion == op.recvRegion &&
                        s.address < r.address + r.bytes && r.address < s.address + s.bytes;
    auto stage = [&](const DeviceRegionPtr& region, uint64_t base, uint64_t bytes, bool readIn,
                     bool holdsRecv) -> Result<uint8_t*> {
      auto b = pool->acquire(bytes);
      if (!b.isOk()) return b.status();
      parts_.push_back({i, *b, base, holdsRecv});
      if (readIn) HC_RETURN_IF_ERROR(transfer(op, region, false, base, b->data, bytes));
      return b->data;
    };
    if (shared) {
      const uint64_t lo = std::min(s.address, r.address);
      const uint64_t hi = std::max(s.address + s.bytes, r.address + r.bytes);
      auto p = stage(op.sendRegion, lo, hi - lo, true, true);
      if (!p.isOk()) return p.status();
      bufs[i].send = *p + (s.address - lo);
      bufs[i].recv = *p + (r.address - lo);
      continue;
    }
    if (s.used()) {
      auto p = stage(op.sendRegion, s.address, s.bytes, true, false);
      if (!p.isOk()) return p.status();
      bufs[i].send = *p;
    }
    if (r.used()) {
      auto p = stage(op.recvRegion, r.address, r.bytes, false, true);
      if (!p.isOk()) return p.status();
      bufs[i].recv = *p;
    }
  }
  return okStatus();
}

Result<uint8_t*> StagedMatch::reserve(uint64_t bytes, StagingPool* pool) {
  pool_ = pool;
  auto b = pool->acquire(bytes);
  if (!b.isOk()) return b.status();
  parts_.push_back({0, *b, 0, false});
  return b->data;
}

Status StagedMatch::stageOut(const std::vector<PendingOp>& ops) {
  for (const auto& part : parts_) {
    const PendingOp& op = ops[part.op];
    const auto& r = op.recvRange;
    if (!part.holdsRecv) continue;  // a send-only copy stays here
    HC_RETURN_IF_ERROR(transfer(op, op.recvRegion, true, r.address,
                                part.buffer.data + (r.address - part.base), r.bytes));
  }
  return okStatus();
}

}  // namespace hc::session
