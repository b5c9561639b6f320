// ClientStaging: the daemon-side copies of operands that live outside the client's segment: in
// the client's own memory (cross-memory attach) or in device memory (the CPU-forwarding path:
// device-to-host before the op, host-to-device after). Before a match runs, each such operand is
// read into a pre-faulted daemon buffer and the op's pointers are aimed there; after it ran, the
// receive parts are written back. The buffers come from the data path's pool and the device
// copies go through its copier (daemon/staging); what is per client (the op's ranges, regions
// and process memory) stays here.
// Runs on the IPC thread.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "daemon/coll/local_plan.h"
#include "daemon/session/pending_op.h"
#include "daemon/staging/device_copier.h"
#include "daemon/staging/staging_pool.h"

namespace hc::session {

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
                               std::vector<coll::RankBuffers>& bufs, staging::StagingPool* pool,
                               staging::DeviceCopier* copier);
  // Writes the receive parts back into the clients' memory and devices.
  [[nodiscard]] Status stageOut(const std::vector<PendingOp>& ops);
  // A pool buffer of at least `bytes` that nothing copies into or out of here (its user stages
  // it elsewhere), kept until this object goes.
  [[nodiscard]] Result<uint8_t*> reserve(uint64_t bytes, staging::StagingPool* pool);

 private:
  struct Part {
    size_t op;
    staging::StagingPool::Buffer buffer;
    uint64_t base;  // client address (or region offset) of buffer.data[0]
    bool holdsRecv;  // the op's receive range lies in this part: it goes back to the client
  };
  // One side's memory: a device region, or else the op's client memory.
  [[nodiscard]] Status transfer(const PendingOp& op, const DeviceRegionPtr& region, bool toClient,
                                uint64_t address, uint8_t* local, uint64_t bytes);

  staging::StagingPool* pool_ = nullptr;
  staging::DeviceCopier* copier_ = nullptr;
  std::vector<Part> parts_;
};

}  // namespace hc::session
