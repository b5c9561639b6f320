// ClientStaging: the daemon-side copies of operands that live outside the client's segment: in
// the client's own memory (cross-memory attach) or in device memory (the CPU-forwarding path:
// device-to-host before the op, host-to-device after). Before a match runs, each such operand is
// read into a pre-faulted daemon buffer and the op's pointers are aimed there; after it ran, the
// receive parts are written back.
// Buffers are pooled by size class: first touch of fresh pages is slow, so they are reused.
// Runs on the IPC thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "daemon/coll/local_plan.h"
#include "daemon/session/device_copier.h"
#include "daemon/session/pending_op.h"

namespace hc::session {

class StagingPool {
 public:
  // liveCapBytes bounds what is handed out at once (session.max_staging_bytes): an acquire
  // beyond it fails with NoResource, so no client's declared sizes can grow the daemon.
  explicit StagingPool(uint64_t idleCapBytes = 256ull << 20, uint64_t liveCapBytes = 8ull << 30)
      : idleCap_(idleCapBytes), liveCap_(liveCapBytes) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  struct Buffer {
    uint8_t* data = nullptr;
    uint64_t bytes = 0;  // the size class: a power of two >= what was asked
  };
  Result<Buffer> acquire(uint64_t bytes);
  void release(Buffer b);

 private:
  uint64_t idleCap_;
  uint64_t liveCap_;
  uint64_t idleBytes_ = 0;
  uint64_t liveBytes_ = 0;  // handed out and not yet released
  std::multimap<uint64_t, uint8_t*> idle_;
};

// The staged operands of one match.
class StagedMatch {
 public:
  StagedMatch() = default;
  StagedMatch(StagedMatch&&) = default;
  StagedMatch& operator=(StagedMatch&&) = default;
  ~StagedMatch();

  // Reads every client-memory and device operand of ops into pool buffers and points bufs[i] at
  // them. ops[i] belongs with bufs[i]. Device copies go through `copier`.
  [[nodiscard]] Status stageIn(const std::vector<PendingOp>& ops,
                               std::vector<coll::RankBuffers>& bufs, StagingPool* pool,
                               DeviceCopier* copier);
  // Writes the receive parts back into the clients' memory and devices.
  [[nodiscard]] Status stageOut(const std::vector<PendingOp>& ops);
  // A pool buffer of at least `bytes` that nothing copies into or out of here (its user stages
  // it elsewhere), kept until this object goes.
  [[nodiscard]] Result<uint8_t*> reserve(uint64_t bytes, StagingPool* pool);

 private:
  struct Part {
    size_t op;
    StagingPool::Buffer buffer;
    uint64_t base;  // client address (or region offset) of buffer.data[0]
    bool holdsRecv;  // the op's receive range lies in this part: it goes back to the client
  };
  // One side's memory: a device region, or else the op's client memory.
  [[nodiscard]] Status transfer(const PendingOp& op, const DeviceRegionPtr& region, bool toClient,
                                uint64_t address, uint8_t* local, uint64_t bytes);

  StagingPool* pool_ = nullptr;
  DeviceCopier* copier_ = nullptr;
  std::vector<Part> parts_;
};

}  // namespace hc::session
