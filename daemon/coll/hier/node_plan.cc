#include "daemon/coll/hier/node_plan.h"

#include <string>

#include "common/reduce/reduce.h"

namespace hc::coll::hier {
namespace {

void copyBytes(const uint8_t* src, uint8_t* dst, size_t bytes) {
  if (bytes == 0 || src == dst) return;
  void* outputs[] = {dst};
  copyRange(src, outputs, 1, 0, bytes);
}

}  // namespace

ScratchPool::Block ScratchPool::acquire(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size >= bytes) {
        Block b = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        keptBytes_ -= b.size;
        return b;
      }
    }
  }
  return Block{std::make_unique_for_overwrite<uint8_t[]>(bytes), bytes};
}

void ScratchPool::release(Block block) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (keptBytes_ + block.size > keepBytes_) return;  // freed here
  keptBytes_ += block.size;
  free_.push_back(std::move(block));
}

NodePlan::NodePlan(const LocalOp& op, const NodeLayout& layout, std::vector<RankBuffers> local,
                   ScratchPool* pool, bool localCombined)
    : op_(op),
      layout_(layout),
      local_(std::move(local)),
      pool_(pool),
      localCombined_(localCombined),
      esz_(dtypeSize(op.dtype)) {}

NodePlan::~NodePlan() {
  for (auto& b : borrowed_) pool_->release(std::move(b));
}

uint8_t* NodePlan::scratch(size_t bytes) {
  if (bytes == 0) return nullptr;
  borrowed_.push_back(pool_->acquire(bytes));
  return borrowed_.back().bytes.get();
}

Result<std::unique_ptr<NodePlan>> NodePlan::make(const LocalOp& op, const NodeLayout& layout,
                                                 std::vector<RankBuffers> local, ScratchPool* pool,
                                                 bool localCombined) {
  const bool transfer = op.type == OpType::Send || op.type == OpType::Recv;
  if (local.size() != (transfer ? 1 : layout.localCount())) {
    return internalError("node plan: " + std::to_string(local.size()) + " local buffers for " +
                         std::to_string(layout.localCount()) + " local ranks");
  }
  const bool reduction =
      op.type == OpType::AllReduce || op.type == OpType::Reduce || op.type == OpType::ReduceScatter;
  if (localCombined && !reduction) {
    return internalError("node plan: only a reduction's local operands can come combined");
  }
  std::unique_ptr<NodePlan> p(new NodePlan(op, layout, std::move(local), pool, localCombined));
  net::NetOpSpec& s = p->spec_;
  s.self = layout.self;
  s.dtype = op.dtype;
  s.redop = op.redop;
  s.finalDivisor = op.redop == RedOp::Avg ? layout.nranks() : 0;
  s.count = op.count;
  const uint64_t n = static_cast<uint64_t>(layout.nranks());
  const bool rootLocal = op.root >= 0 && op.root < layout.nranks() && layout.isLocal(op.root);
  const RankBuffers* root =
      rootLocal ? &p->local_[layout.localOfRank[static_cast<size_t>(op.root)]] : nullptr;
  const uint32_t rootNode = op.root >= 0 && op.root < layout.nranks()
                                ? layout.nodeOfRank[static_cast<size_t>(op.root)]
                                : 0;
  switch (op.type) {
    case OpType::AllReduce:
      s.kind = net::NetOpKind::AllReduce;
      p->node_ = p->local_[0].recv;
      break;
    case OpType::Broadcast:
      s.kind = net::NetOpKind::Broadcast;
      s.root = rootNode;
      p->node_ = rootLocal ? root->recv : p->local_[0].recv;
      break;
    case OpType::Reduce:
      s.kind = net::NetOpKind::Reduce;
      s.root = rootNode;
      p->node_ = rootLocal ? root->recv : p->scratch(op.count * p->esz_);
      break;
    case OpType::AllGather:
      s.kind = net::NetOpKind::AllGather;
      p->node_ =
          layout.nodeOrderIsRankOrder() ? p->local_[0].recv : p->scratch(n * op.count * p->esz_);
      p->planBlocks(op.count);
      break;
    case OpType::ReduceScatter:
      s.kind = net::NetOpKind::ReduceScatter;
      p->node_ = p->scratch(n * op.count * p->esz_);
      p->planBlocks(op.count);
      break;
    case OpType::Gather:
      s.kind = net::NetOpKind::Gather;
      s.root = rootNode;
      p->node_ = rootLocal && layout.nodeOrderIsRankOrder() ? root->recv
                                                            : p->scratch(n * op.count * p->esz_);
      p->planBlocks(op.count);
      break;
    case OpType::Scatter:
      s.kind = net::NetOpKind::Scatter;
      s.root = rootNode;
      p->node_ = p->scratch(n * op.count * p->esz_);
      p->planBlocks(op.count);
      break;
    case OpType::AllToAll:
      s.kind = net::NetOpKind::AllToAll;
      p->planAllToAll();
      break;
    case OpType::Barrier:
      s.kind = net::NetOpKind::Barrier;
      break;
    case OpType::Send:
      s.kind = net::NetOpKind::Send;
      s.root = rootNode;
      p->node_ = const_cast<uint8_t*>(p->local_[0].send);  // only read by a send
      break;
    case OpType::Recv:
      s.kind = net::NetOpKind::Recv;
      s.root = rootNode;
      p->node_ = p->local_[0].recv;
      break;
    default:
      return invalidArgument(std::string("operation ") + std::to_string(int(op.type)) +
                             " is not supported on a communicator that spans daemons");
  }
  s.buffer = p->node_;
  return p;
}

void NodePlan::planBlocks(uint64_t perRank) {
  spec_.blockCounts.clear();
  for (const auto& ranks : layout_.ranksOfNode) spec_.blockCounts.push_back(ranks.size() * perRank);
}

void NodePlan::planAllToAll() {
  // From node d's point of view, this node's L ranks send to d's L_d ranks: a block of
  // L * L_d slots ordered (source local rank, destination local rank); what arrives from node s
  // is ordered the same way, (s's local rank, this node's local rank).
  const uint64_t c = op_.count;
  const uint64_t L = layout_.localCount();
  for (const auto& ranks : layout_.ranksOfNode) {
    spec_.sendCounts.push_back(L * ranks.size() * c);
    spec_.blockCounts.push_back(ranks.size() * L * c);
  }
  const uint64_t total = L * static_cast<uint64_t>(layout_.nranks()) * c * esz_;
  sendNode_ = scratch(total);
  node_ = scratch(total);
  spec_.sendBuffer = sendNode_;
}

void NodePlan::reduceInto(uint8_t* out, uint64_t srcOffset, uint64_t count) const {
  if (count == 0) return;
  std::vector<const void*> inputs;
  std::vector<uint64_t> scalars;
  for (const auto& b : local_) {
    inputs.push_back(b.send + srcOffset * esz_);
    scalars.push_back(b.scalar);
  }
  void* outputs[] = {out};
  // Avg sums here and divides once among the nodes (spec_.finalDivisor).
  const RedOp redop = op_.redop == RedOp::Avg ? RedOp::Sum : op_.redop;
  const bool premul = redop == RedOp::PreMulSum;
  ReduceSpec spec{op_.dtype,
                  redop,
                  inputs.data(),
                  inputs.size(),
                  outputs,
                  1,
                  premul ? scalars.data() : nullptr,
                  inputs.size()};
  reduceRange(spec, 0, count);
}

void NodePlan::before() {
  const uint64_t c = op_.count;
  const size_t bytes = c * esz_;
  const auto& mine = layout_.ranksOfNode[layout_.self];
  switch (op_.type) {
    case OpType::AllReduce:
    case OpType::Reduce: {
      const bool plainCopyInPlace =
          local_.size() == 1 && local_[0].send == node_ && op_.redop != RedOp::PreMulSum;
      if (localCombined_) {
        copyBytes(local_[0].send, node_, bytes);
      } else if (!plainCopyInPlace) {
        reduceInto(node_, 0, c);
      }
      break;
    }
    case OpType::Broadcast:
      if (op_.root >= 0 && layout_.isLocal(op_.root)) {
        copyBytes(local_[layout_.localOfRank[size_t(op_.root)]].send, node_, bytes);
      }
      break;
    case OpType::AllGather:
    case OpType::Gather:
      for (size_t l = 0; l < mine.size(); ++l) {
        copyBytes(local_[l].send, node_ + layout_.slotOf(mine[l], c) * esz_, bytes);
      }
      break;
    case OpType::ReduceScatter:
      for (uint32_t r = 0; r < static_cast<uint32_t>(layout_.nranks()); ++r) {
        uint8_t* slot = node_ + layout_.slotOf(r, c) * esz_;
        if (localCombined_) {
          copyBytes(local_[0].send + uint64_t{r} * bytes, slot, bytes);
        } else {
          reduceInto(slot, uint64_t{r} * c, c);
        }
      }
      break;
    case OpType::Scatter:
      if (op_.root >= 0 && layout_.isLocal(op_.root)) {
        const uint8_t* src = local_[layout_.localOfRank[size_t(op_.root)]].send;
        for (uint32_t r = 0; r < static_cast<uint32_t>(layout_.nranks()); ++r) {
          copyBytes(src + uint64_t{r} * bytes, node_ + layout_.slotOf(r, c) * esz_, bytes);
        }
      }
      break;
    case OpType::AllToAll: {
      const uint64_t L = mine.size();
      for (uint32_t d = 0; d < layout_.nodes(); ++d) {
        const auto& theirs = layout_.ranksOfNode[d];
        uint8_t* block = sendNode_ + L * layout_.nodeOffset(d, c) * esz_;
        for (uint64_t l = 0; l < L; ++l) {
          for (uint64_t m = 0; m < theirs.size(); ++m) {
            copyBytes(local_[l].send + uint64_t{theirs[m]} * bytes,
                      block + (l * theirs.size() + m) * bytes, bytes);
          }
        }
      }
      break;
    }
    default:
      break;
  }
}

void NodePlan::after() {
  const uint64_t c = op_.count;
  const size_t bytes = c * esz_;
  const auto& mine = layout_.ranksOfNode[layout_.self];
  const uint64_t n = static_cast<uint64_t>(layout_.nranks());
  switch (op_.type) {
    case OpType::AllReduce:
    case OpType::Broadcast:
      for (auto& b : local_) copyBytes(node_, b.recv, bytes);
      break;
    case OpType::AllGather:
      for (uint32_t r = 0; r < n; ++r) {
        const uint8_t* src = node_ + layout_.slotOf(r, c) * esz_;
        for (auto& b : local_) copyBytes(src, b.recv + uint64_t{r} * bytes, bytes);
      }
      break;
    case OpType::Gather:
      if (op_.root >= 0 && layout_.isLocal(op_.root)) {
        uint8_t* dst = local_[layout_.localOfRank[size_t(op_.root)]].recv;
        for (uint32_t r = 0; r < n; ++r) {
          copyBytes(node_ + layout_.slotOf(r, c) * esz_, dst + uint64_t{r} * bytes, bytes);
        }
      }
      break;
    case OpType::ReduceScatter:
    case OpType::Scatter:
      for (size_t l = 0; l < mine.size(); ++l) {
        copyBytes(node_ + layout_.slotOf(mine[l], c) * esz_, local_[l].recv, bytes);
      }
      break;
    case OpType::AllToAll: {
      const uint64_t L = mine.size();
      for (uint32_t s = 0; s < layout_.nodes(); ++s) {
        const auto& theirs = layout_.ranksOfNode[s];
        const uint8_t* block = node_ + L * layout_.nodeOffset(s, c) * esz_;
        for (uint64_t k = 0; k < theirs.size(); ++k) {
          for (uint64_t m = 0; m < L; ++m) {
            copyBytes(block + (k * L + m) * bytes, local_[m].recv + uint64_t{theirs[k]} * bytes,
                      bytes);
          }
        }
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace hc::coll::hier
