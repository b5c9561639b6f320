#include "daemon/coll/hier/inline_op.h"

#include "common/status.h"
#include "daemon/coll/reduce.h"

namespace hc::coll::hier {
namespace {

bool reduction(OpType type) { return type == OpType::AllReduce || type == OpType::Reduce; }

bool rootIsLocal(const LocalOp& op, const NodeLayout& layout) {
  return op.root >= 0 && op.root < layout.nranks() && layout.isLocal(op.root);
}

const RankBuffers& rootBuffers(const LocalOp& op, const NodeLayout& layout,
                               const std::vector<RankBuffers>& local) {
  return local[layout.localOfRank[static_cast<size_t>(op.root)]];
}

}  // namespace

bool inlinable(const LocalOp& op) {
  if (op.type == OpType::Barrier) return true;
  if (!reduction(op.type) && op.type != OpType::Broadcast) return false;
  return op.count <= kInlineBytes / dtypeSize(op.dtype);
}

void contribute(const LocalOp& op, const NodeLayout& layout, const std::vector<RankBuffers>& local,
                uint8_t* out) {
  HC_CHECK(inlinable(op));
  if (op.count == 0) return;
  if (op.type == OpType::Broadcast) {
    if (!rootIsLocal(op, layout)) return;
    void* outputs[] = {out};
    copyRange(rootBuffers(op, layout, local).send, outputs, 1, 0, op.count * dtypeSize(op.dtype));
    return;
  }
  if (!reduction(op.type)) return;
  std::vector<const void*> inputs;
  std::vector<uint64_t> scalars;
  for (const RankBuffers& b : local) {
    inputs.push_back(b.send);
    scalars.push_back(b.scalar);
  }
  void* outputs[] = {out};
  // As NodePlan: Avg sums here and divides once among the nodes (result()).
  const RedOp redop = op.redop == RedOp::Avg ? RedOp::Sum : op.redop;
  const ReduceSpec spec{.dtype = op.dtype,
                        .redop = redop,
                        .inputs = inputs.data(),
                        .nInputs = inputs.size(),
                        .outputs = outputs,
                        .nOutputs = 1,
                        .scalars = redop == RedOp::PreMulSum ? scalars.data() : nullptr,
                        .nRanks = inputs.size()};
  reduceRange(spec, 0, op.count);
}

void result(const LocalOp& op, const NodeLayout& layout,
            const std::vector<const uint8_t*>& contributions,
            const std::vector<RankBuffers>& local) {
  HC_CHECK(inlinable(op));
  HC_CHECK(contributions.size() == layout.ranksOfNode.size());
  if (op.count == 0 || op.type == OpType::Barrier) return;
  std::vector<void*> outputs;
  if (op.type == OpType::Reduce) {
    if (!rootIsLocal(op, layout)) return;
    outputs.push_back(rootBuffers(op, layout, local).recv);
  } else {
    for (const RankBuffers& b : local) outputs.push_back(b.recv);
  }
  if (op.type == OpType::Broadcast) {
    const uint32_t rootNode = layout.nodeOfRank[static_cast<size_t>(op.root)];
    copyRange(contributions[rootNode], outputs.data(), outputs.size(), 0,
              op.count * dtypeSize(op.dtype));
    return;
  }
  // Among the nodes, PreMulSum is a plain sum (each node scaled its own) and Avg divides once.
  const RedOp redop = op.redop == RedOp::PreMulSum ? RedOp::Sum : op.redop;
  std::vector<const void*> inputs(contributions.begin(), contributions.end());
  const ReduceSpec spec{.dtype = op.dtype,
                        .redop = redop,
                        .inputs = inputs.data(),
                        .nInputs = inputs.size(),
                        .outputs = outputs.data(),
                        .nOutputs = outputs.size(),
                        .scalars = nullptr,
                        .nRanks = redop == RedOp::Avg ? static_cast<size_t>(layout.nranks()) : 1};
  reduceRange(spec, 0, op.count);
}

}  // namespace hc::coll::hier
