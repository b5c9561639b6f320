#include "daemon/session/device_reduce.h"

#include <vector>

#include "daemon/coll/reduce.h"

namespace hc::session {
namespace {

bool reduces(ipc::OpType type) {
  return type == ipc::OpType::AllReduce || type == ipc::OpType::Reduce ||
         type == ipc::OpType::ReduceScatter;
}

// Whether the op's result lands in its receive buffer: every rank of an allreduce, the root of
// a reduce.
bool receives(const PendingOp& op, int rank) {
  return op.type != ipc::OpType::Reduce || rank == op.root;
}

}  // namespace

device::Device* reductionDevice(const Match& match) {
  if (match.ops.empty()) return nullptr;
  const PendingOp& head = match.ops.front();
  if (!reduces(head.type) || head.count == 0) return nullptr;
  device::Device* device = nullptr;
  auto same = [&](const DeviceRegionPtr& region) {
    if (region == nullptr) return false;
    if (device == nullptr) device = region->device();
    return region->device() == device;
  };
  for (size_t i = 0; i < match.ops.size(); ++i) {
    const PendingOp& op = match.ops[i];
    if (op.scalarSource != nullptr) return nullptr;  // read from memory when the op runs
    if (!op.sendRange.used() || !same(op.sendRegion)) return nullptr;
    if (receives(op, match.refs[i].rank) && (!op.recvRange.used() || !same(op.recvRegion))) {
      return nullptr;
    }
  }
  return device;
}

Status reduceOnDevice(const Match& match, device::Device* device, DeviceCopier& copier) {
  const PendingOp& head = match.ops.front();
  const bool scatter = head.type == ipc::OpType::ReduceScatter;
  const uint64_t elementBytes = coll::dtypeSize(head.dtype);
  std::vector<uint64_t> scalars;
  if (head.redop == static_cast<uint8_t>(ipc::RedOp::PreMulSum)) {
    for (const PendingOp& op : match.ops) scalars.push_back(op.buffers.scalar);
  }
  // Allreduce and reduce: one reduction into every receiving buffer. Reduce-scatter: one per
  // rank, over that rank's block of every input, into its own buffer.
  const size_t reductions = scatter ? match.ops.size() : 1;
  for (size_t block = 0; block < reductions; ++block) {
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    for (size_t i = 0; i < match.ops.size(); ++i) {
      const PendingOp& op = match.ops[i];
      // The ranges hold offsets into the regions (validate.cc checked them against the sizes).
      const uint64_t skip = scatter ? match.refs[block].rank * head.count * elementBytes : 0;
      inputs.push_back(op.sendRegion->data() + op.sendRange.address + skip);
      const bool lands = scatter ? i == block : receives(op, match.refs[i].rank);
      if (lands) outputs.push_back(op.recvRegion->data() + op.recvRange.address);
    }
    device::ReduceWork work;
    work.dtype = head.dtype;
    work.redop = head.redop;
    work.inputs = inputs;
    work.outputs = outputs;
    work.scalars = scalars;
    work.nRanks = inputs.size();
    work.count = head.count;
    HC_RETURN_IF_ERROR(copier.reduce(device, work));
  }
  return okStatus();
}

}  // namespace hc::session
