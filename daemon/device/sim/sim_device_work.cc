// SimDevice's work: copies and reductions, checked at enqueue and run on the stream's worker.
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/device/sim/sim_device.h"

namespace hc::device {
namespace {

// True when [a, a+n) and [b, b+n) share a byte.
bool overlaps(const void* a, const void* b, size_t n) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return n > 0 && x < y + n && y < x + n;
}

// The descriptor of one reduction, owned by its task: the caller's spans may go away as soon as
// reduceAsync() returns.
struct OwnedReduce {
  Dtype dtype;
  RedOp redop;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<uint64_t> scalars;
  size_t nRanks;
  size_t count;

  explicit OwnedReduce(const ReduceWork& w)
      : dtype(w.dtype),
        redop(w.redop),
        inputs(w.inputs.begin(), w.inputs.end()),
        outputs(w.outputs.begin(), w.outputs.end()),
        scalars(w.scalars.begin(), w.scalars.end()),
        nRanks(w.nRanks),
        count(w.count) {}

  ReduceWork view() const {
    ReduceWork w;
    w.dtype = dtype;
    w.redop = redop;
    w.inputs = inputs;
    w.outputs = outputs;
    w.scalars = scalars;
    w.nRanks = nRanks;
    w.count = count;
    return w;
  }
};

}  // namespace

Status SimDevice::copyAsync(StreamId stream, void* dst, const void* src, size_t bytes) {
  auto found = findStream(stream);
  if (!found) return found.status();
  if (bytes == 0 || dst == src) return okStatus();
  if (dst == nullptr || src == nullptr) return invalidArgument("copyAsync with a null buffer");
  if (overlaps(dst, src, bytes)) return invalidArgument("copyAsync ranges partially overlap");
  HC_RETURN_IF_ERROR(checkReach(src, "copy source", /*kernel=*/false));
  HC_RETURN_IF_ERROR(checkReach(dst, "copy destination", /*kernel=*/false));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HC_RETURN_IF_ERROR(ranges_.check(src, bytes, "copy source"));
    HC_RETURN_IF_ERROR(ranges_.check(dst, bytes, "copy destination"));
  }
  // Counted at enqueue, so "the N-th copy" is the N-th call, whichever stream runs it first.
  const uint64_t ordinal = copies_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (faults_.failCopyAt != 0 && ordinal == faults_.failCopyAt) {
    std::string message = "injected copy fault on " + name_ + " (copy " + std::to_string(ordinal) +
                          " of this device)";
    (*found)->enqueue([message]() { return Status(Code::DeviceError, message); }, bytes);
    return okStatus();
  }
  (*found)->enqueue(
      [dst, src, bytes]() {
        std::memcpy(dst, src, bytes);
        return okStatus();
      },
      bytes);
  return okStatus();
}

Status SimDevice::checkReach(const void* ptr, const char* what, bool kernel) const {
  std::optional<SimOwner> owner = SimAddressSpace::instance().ownerOf(ptr);
  if (!owner || owner->device == this) return okStatus();
  if (kernel) {
    return invalidArgument(std::string(what) + " lies in the memory of " + owner->name +
                           ": a kernel on " + name_ +
                           " reaches its own device's memory only (copy it over first)");
  }
  if (owner->vendor != info_.vendor) {
    return invalidArgument(std::string(what) + " lies in the memory of " + owner->name +
                           ", which " + name_ +
                           " cannot reach: no runtime copies between GPUs "
                           "of two vendors (stage through host memory)");
  }
  return okStatus();
}

Status SimDevice::checkReduceBounds(const ReduceWork& work) const {
  const size_t size = dtypeSize(work.dtype);
  if (work.count == 0) return okStatus();
  const size_t bytes = size * work.count;
  if (bytes / size != work.count) return invalidArgument("reduceAsync: count overflows");
  for (const void* in : work.inputs) HC_RETURN_IF_ERROR(ranges_.check(in, bytes, "reduce input"));
  for (void* out : work.outputs) HC_RETURN_IF_ERROR(ranges_.check(out, bytes, "reduce output"));
  return okStatus();
}

Status SimDevice::reduceAsync(StreamId stream, const ReduceWork& work) {
  auto found = findStream(stream);
  if (!found) return found.status();
  if (!kernel_) return Status(Code::DeviceError, name_ + " has no reduction kernel");
  if (work.inputs.empty() || work.outputs.empty()) {
    return invalidArgument("reduceAsync needs at least one input and one output");
  }
  if (!work.scalars.empty() && work.scalars.size() != work.inputs.size()) {
    return invalidArgument("reduceAsync: " + std::to_string(work.scalars.size()) + " scalars for " +
                           std::to_string(work.inputs.size()) + " inputs");
  }
  if (work.nRanks == 0) return invalidArgument("reduceAsync: nRanks is 0");
  if (work.count == 0) return okStatus();
  for (const void* in : work.inputs) {
    if (in == nullptr) return invalidArgument("reduceAsync: null input");
  }
  for (void* out : work.outputs) {
    if (out == nullptr) return invalidArgument("reduceAsync: null output");
  }
  for (const void* in : work.inputs) HC_RETURN_IF_ERROR(checkReach(in, "reduce input", true));
  for (void* out : work.outputs) HC_RETURN_IF_ERROR(checkReach(out, "reduce output", true));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HC_RETURN_IF_ERROR(checkReduceBounds(work));
  }
  // Not timed by the copy bandwidth: a GPU kernel reads device memory tens of times faster than
  // a copy engine moves bytes over PCIe. The task pays the stream's latency, the kernel rate
  // (timing kernelGBps, bytes of one input; 0 = none) and its own run time on the worker (the
  // real reduction, at host memory speed).
  auto owned = std::make_shared<const OwnedReduce>(work);
  const uint64_t inputBytes = work.count * dtypeSize(work.dtype);
  (*found)->enqueue(
      [kernel = kernel_, owned]() {
        kernel(owned->view(), 0, owned->count);
        return okStatus();
      },
      inputBytes, simdev::TaskKind::Kernel);
  return okStatus();
}

}  // namespace hc::device
