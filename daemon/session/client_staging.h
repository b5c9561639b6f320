// ClientStaging: the daemon-side copies of operands that live in clients' own memory
// (cross-memory attach). Before a match runs, each such operand is read into a pre-faulted daemon
// buffer and the op's pointers are aimed there; after it ran, the receive parts are written back.
// Buffers are pooled by size class: first touch of fresh pages is slow, so they are reused.
// Runs on the IPC thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "daemon/coll/local_plan.h"
#include "daemon/session/pending_op.h"

namespace hc::session {

class StagingPool {
 public:
  explicit StagingPool(uint64_t idleCapBytes = 256ull << 20) : idleCap_(idleCapBytes) {}
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
  uint64_t idleBytes_ = 0;
  std::multimap<uint64_t, uint8_t*> idle_;
};

// The staged operands of one match.
class StagedMatch {
 public:
  StagedMatch() = default;
  StagedMatch(StagedMatch&&) = default;
  StagedMatch& operator=(StagedMatch&&) = default;
  ~StagedMatch();

  // Reads every client-memory operand of ops into pool buffers and points bufs[i] at them.
  // ops[i] belongs with bufs[i].
  [[nodiscard]] Status stageIn(const std::vector<PendingOp>& ops,
                               std::vector<coll::RankBuffers>& bufs, StagingPool* pool);
  // Writes the receive parts back into the clients' memory.
  [[nodiscard]] Status stageOut(const std::vector<PendingOp>& ops);

 private:
  struct Part {
    size_t op;
    StagingPool::Buffer buffer;
    uint64_t base;  // client address of buffer.data[0]
    bool holdsRecv;  // the op's receive range lies in this part: it goes back to the client
  };
  StagingPool* pool_ = nullptr;
  std::vector<Part> parts_;
};

}  // namespace hc::session
