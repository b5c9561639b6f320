#include "daemon/staging/device_reduce.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/reduce/reduce.h"

namespace hc::staging {
namespace {

// Scratch slots start on this boundary, which every kernel's vector loads accept.
constexpr uint64_t kSlotAlignment = 256;

// Whether the op's result lands in its receive buffer: every rank of an allreduce, the root of
// a reduce.
bool receives(const Operand& op) { return op.type != OpType::Reduce || op.rank == op.root; }

bool sameKind(const device::Device& a, const device::Device& b) {
  return a.info().vendor == b.info().vendor && a.info().backend == b.info().backend;
}

// A buffer of one reduction and the device it lives on.
struct Place {
  uint8_t* at;
  device::Device* device;
};

// One reduction: over `count` elements of every input into every output.
struct Reduction {
  std::vector<Place> inputs;
  std::vector<Place> outputs;
};

// Allreduce and reduce: one reduction into every receiving buffer. Reduce-scatter: one per rank,
// over that rank's block of every input, into its own buffer.
std::vector<Reduction> reductionsOf(const std::vector<Operand>& ops) {
  const Operand& head = ops.front();
  const bool scatter = head.type == OpType::ReduceScatter;
  const uint64_t elementBytes = dtypeSize(head.dtype);
  std::vector<Reduction> out(scatter ? ops.size() : 1);
  for (size_t block = 0; block < out.size(); ++block) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const Operand& op = ops[i];
      // The ranges hold offsets into the regions (the session checked them against the sizes).
      const uint64_t skip = scatter ? ops[block].rank * head.count * elementBytes : 0;
      out[block].inputs.push_back({op.send.region + op.send.address + skip, op.send.device});
      const bool lands = scatter ? i == block : receives(op);
      if (lands) {
        out[block].outputs.push_back({op.recv.region + op.recv.address, op.recv.device});
      }
    }
  }
  return out;
}

}  // namespace

ReductionPlacement reductionPlacement(const std::vector<Operand>& ops) {
  if (ops.empty()) return {};
  const Operand& head = ops.front();
  if (!isReduction(head.type) || head.count == 0) return {};
  std::vector<std::pair<device::Device*, int>> devices;  // with the operands each holds
  auto add = [&](const OperandSide& side) {
    if (!side.onDevice()) return false;
    device::Device* device = side.device;
    if (!devices.empty() && !sameKind(*devices.front().first, *device)) return false;
    auto it = std::find_if(devices.begin(), devices.end(),
                           [device](const auto& seen) { return seen.first == device; });
    if (it == devices.end()) {
      devices.emplace_back(device, 1);
    } else {
      ++it->second;
    }
    return true;
  };
  for (const Operand& op : ops) {
    if (op.scalarSource != nullptr) return {};  // read from memory when the op runs
    if (!op.send.used() || !add(op.send)) return {};
    if (receives(op) && (!op.recv.used() || !add(op.recv))) return {};
  }
  // The device with the most operands moves the fewest bytes; the first of equals.
  auto home = std::max_element(devices.begin(), devices.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  ReductionPlacement placement{home->first, devices.size() > 1};
  if (placement.spansDevices && !placement.home->capabilities().peerCopy) return {};
  return placement;
}

namespace {

uint64_t slotSize(uint64_t bytes) {
  return (bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}

// The dtype, operator and scalars every reduction of one match shares.
struct Kernel {
  Dtype dtype = Dtype::Int8;
  RedOp redop = RedOp::Sum;
  std::vector<uint64_t> scalars;  // PreMulSum: one per op, in op order
};

Kernel kernelOf(const std::vector<Operand>& ops, bool avgAsSum) {
  const Operand& head = ops.front();
  Kernel k{head.dtype, head.redop, {}};
  if (avgAsSum && k.redop == RedOp::Avg) {
    k.redop = RedOp::Sum;
  }
  if (k.redop == RedOp::PreMulSum) {
    for (const Operand& op : ops) k.scalars.push_back(op.buffers.scalar);
  }
  return k;
}

// Scratch slots for the operands of `reductions` that live on other devices than home.
size_t awaySlots(const std::vector<Reduction>& reductions, device::Device* home) {
  auto away = [home](const Place& o) { return o.device != home; };
  size_t slots = 0;
  for (const Reduction& r : reductions) {
    slots = std::max<size_t>(slots, std::count_if(r.inputs.begin(), r.inputs.end(), away) +
                                        std::count_if(r.outputs.begin(), r.outputs.end(), away));
  }
  return slots;
}

// A copy on home's lanes; one that cannot be enqueued ends the work, after what was enqueued
// before it has been waited for.
Status copyOnHome(DeviceCopier& copier, device::Device* home, void* dst, const void* src,
                  uint64_t bytes, bool toDevice) {
  Status queued = copier.enqueue(home, dst, src, bytes, toDevice);
  if (!queued.isOk()) {
    [[maybe_unused]] Status drained = copier.drain();
  }
  return queued;
}

// One reduction of `count` elements at each operand's address plus `offset` bytes, on home.
// Operands on other devices pass through home's scratch `slots` (slotBytes apart): inputs are
// copied in before the kernel, outputs copied back after it. Waits for all of it.
Status reduceWindow(const Reduction& reduction, uint64_t offset, uint64_t count,
                    const Kernel& kernel, device::Device* home, DeviceCopier& copier,
                    uint8_t* slots, uint64_t slotBytes) {
  const uint64_t bytes = count * dtypeSize(kernel.dtype);
  uint8_t* slot = slots;
  bool copiedIn = false;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<std::pair<uint8_t*, uint8_t*>> results;  // (buffer on another device, slot)
  for (const Place& in : reduction.inputs) {
    if (in.device == home) {
      inputs.push_back(in.at + offset);
      continue;
    }
    HC_RETURN_IF_ERROR(copyOnHome(copier, home, slot, in.at + offset, bytes, true));
    copiedIn = true;
    inputs.push_back(slot);
    slot += slotBytes;
  }
  for (const Place& out : reduction.outputs) {
    if (out.device == home) {
      outputs.push_back(out.at + offset);
      continue;
    }
    results.emplace_back(out.at + offset, slot);
    outputs.push_back(slot);
    slot += slotBytes;
  }
  // Waits only when there is something to wait for: a drain also waits for copies others left
  // running (the pipeline's copies out of the slice before), which the kernel does not need.
  if (copiedIn) HC_RETURN_IF_ERROR(copier.drain());
  device::ReduceWork work;
  work.dtype = kernel.dtype;
  work.redop = kernel.redop;
  work.inputs = inputs;
  work.outputs = outputs;
  work.scalars = kernel.scalars;
  work.nRanks = inputs.size();
  work.count = count;
  HC_RETURN_IF_ERROR(copier.reduce(home, work));
  if (results.empty()) return okStatus();
  for (auto [away, from] : results) {
    HC_RETURN_IF_ERROR(copyOnHome(copier, home, away, from, bytes, false));
  }
  return copier.drain();
}

}  // namespace

Status reduceOnDevice(const std::vector<Operand>& ops, const ReductionPlacement& placement,
                      DeviceCopier& copier) {
  const Operand& head = ops.front();
  device::Device* home = placement.home;
  const uint64_t elementBytes = dtypeSize(head.dtype);
  const Kernel kernel = kernelOf(ops, /*avgAsSum=*/false);
  const std::vector<Reduction> reductions = reductionsOf(ops);
  // Operands on other devices pass through the home's scratch a window at a time, so the
  // scratch stays a few staging chunks however large the message.
  const uint64_t window =
      placement.spansDevices
          ? std::min(head.count, std::max<uint64_t>(1, copier.chunkBytes() / elementBytes))
          : head.count;
  const uint64_t slotBytes = slotSize(window * elementBytes);
  uint8_t* slots = nullptr;
  if (placement.spansDevices) {
    auto got = copier.scratch(home, awaySlots(reductions, home) * slotBytes);
    if (!got.isOk()) return got.status();
    slots = *got;
  }
  for (const Reduction& reduction : reductions) {
    for (uint64_t first = 0; first < head.count; first += window) {
      HC_RETURN_IF_ERROR(reduceWindow(reduction, first * elementBytes,
                                      std::min(window, head.count - first), kernel, home, copier,
                                      slots, slotBytes));
    }
  }
  return okStatus();
}

Status combineSlice(const std::vector<Operand>& ops, const ReductionPlacement& placement,
                    int nranks, uint64_t first, uint64_t count, DeviceCopier& copier,
                    uint8_t* out) {
  const Operand& head = ops.front();
  device::Device* home = placement.home;
  const uint64_t elementBytes = dtypeSize(head.dtype);
  const bool scatter = head.type == OpType::ReduceScatter;
  const uint64_t blocks = scatter ? static_cast<uint64_t>(nranks) : 1;
  const uint64_t bytes = count * elementBytes;
  // Avg is summed here and divided once among the daemons, as NodePlan does on the host.
  const Kernel kernel = kernelOf(ops, /*avgAsSum=*/true);
  // Home's scratch: the packed result (block b at b * bytes), then a slot per operand elsewhere.
  const uint64_t packed = slotSize(blocks * bytes);
  const uint64_t slotBytes = slotSize(bytes);
  size_t away = 0;
  for (const Operand& op : ops) away += op.send.device != home ? 1 : 0;
  auto scratch = copier.scratch(home, packed + away * slotBytes);
  if (!scratch.isOk()) return scratch.status();
  for (uint64_t b = 0; b < blocks; ++b) {
    Reduction block;
    for (const Operand& op : ops) {
      // Block b's slice: elements [first, first + count) of the block of `total` elements.
      const uint64_t at = op.send.address + (b * head.count + first) * elementBytes;
      block.inputs.push_back({op.send.region + at, op.send.device});
    }
    block.outputs.push_back({*scratch + b * bytes, home});
    HC_RETURN_IF_ERROR(
        reduceWindow(block, 0, count, kernel, home, copier, *scratch + packed, slotBytes));
  }
  return copyOnHome(copier, home, out, *scratch, blocks * bytes, /*toDevice=*/false);
}

}  // namespace hc::staging
