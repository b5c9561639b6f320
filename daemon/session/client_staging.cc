#include "daemon/session/client_staging.h"

#include <algorithm>

namespace hc::session {

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
                            std::vector<coll::RankBuffers>& bufs, staging::StagingPool* pool,
                            staging::DeviceCopier* copier) {
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

Result<uint8_t*> StagedMatch::reserve(uint64_t bytes, staging::StagingPool* pool) {
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
