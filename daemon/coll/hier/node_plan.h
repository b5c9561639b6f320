// NodePlan: one operation of a communicator that spans daemons, in three steps:
//   before()  the local ranks' buffers are combined into this node's buffer: reduced (allreduce,
//             reduce, reduce-scatter) or copied into this node's block (allgather, gather,
//             scatter from a local root, all-to-all);
//   spec()    the NetOp the daemons run on that buffer (coll/net/net_op.h); the caller adds the
//             transport, peers, communicator tag, sequence and options;
//   after()   the result is copied from the node buffer to every local rank's receive buffer.
// Node buffers are in node order (node 0's ranks, then node 1's, each in local order). When that
// is also rank order, and a local receive buffer can hold the whole node buffer, the plan uses
// that receive buffer and skips a copy; otherwise it borrows scratch from a ScratchPool.
//
// Numerics: Avg and PreMulSum are summed among the local ranks (PreMulSum with each rank's
// scalar) and the NetOp divides once at the end (finalDivisor), so every rank of every node gets
// the same bits.
// Depends on hc_coll (reduce kernels) and hc_coll_net (NetOpSpec). Not thread-safe; before() and
// after() run on the caller's thread, the NetOp in between on the progress thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "daemon/coll/hier/node_layout.h"
#include "daemon/coll/local_plan.h"
#include "daemon/coll/net/net_op.h"

namespace hc::coll::hier {

// Scratch node buffers, kept for reuse: fresh pages cost a page fault each (first touch runs at
// a fraction of memory bandwidth), so a steady stream of operations should not allocate.
class ScratchPool {
 public:
  explicit ScratchPool(size_t keepBytes = size_t{1} << 30) : keepBytes_(keepBytes) {}
  struct Block {
    std::unique_ptr<uint8_t[]> bytes;
    size_t size = 0;
  };
  Block acquire(size_t bytes);
  void release(Block block);

 private:
  std::mutex mutex_;
  size_t keepBytes_;
  size_t keptBytes_ = 0;
  std::vector<Block> free_;
};

class NodePlan {
 public:
  // `local` holds the local ranks' buffers in local order (layout.ranksOfNode[layout.self]),
  // already resolved and staged. For a transfer with a rank on another node (op.type Send or
  // Recv, op.root = the peer rank), `local` holds the one local rank's buffers. The descriptors
  // were validated; the layout and pool outlive the plan.
  // `localCombined` (allreduce, reduce, reduce-scatter): the local ranks' operands were already
  // combined elsewhere (on a device), with Avg summed and PreMulSum scalars applied, into the
  // buffer every local[i].send points at; before() copies it into the node buffer instead of
  // reducing.
  [[nodiscard]] static Result<std::unique_ptr<NodePlan>> make(const LocalOp& op,
                                                              const NodeLayout& layout,
                                                              std::vector<RankBuffers> local,
                                                              ScratchPool* pool,
                                                              bool localCombined = false);
  ~NodePlan();
  NodePlan(const NodePlan&) = delete;
  NodePlan& operator=(const NodePlan&) = delete;

  void before();
  const net::NetOpSpec& spec() const { return spec_; }
  void after();

 private:
  NodePlan(const LocalOp& op, const NodeLayout& layout, std::vector<RankBuffers> local,
           ScratchPool* pool, bool localCombined);
  uint8_t* scratch(size_t bytes);
  void reduceInto(uint8_t* out, uint64_t srcOffset, uint64_t count) const;
  void planBlocks(uint64_t perRank);
  void planAllToAll();

  LocalOp op_;
  const NodeLayout& layout_;
  std::vector<RankBuffers> local_;
  ScratchPool* pool_;
  bool localCombined_;
  std::vector<ScratchPool::Block> borrowed_;
  size_t esz_ = 0;
  uint8_t* node_ = nullptr;      // the node buffer (spec_.buffer)
  uint8_t* sendNode_ = nullptr;  // all-to-all only: what this node sends
  net::NetOpSpec spec_;
};

}  // namespace hc::coll::hier
