// makeNetOp: validate a NetOpSpec, pick the algorithm, build its schedule and the runner.
#include "daemon/coll/net/net_op.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <utility>

#include "common/reduce/reduce.h"
#include "daemon/coll/net/algorithms.h"
#include "daemon/coll/net/schedule_runner.h"

namespace hc::coll::net {
namespace {

bool isReduction(NetOpKind kind) {
  return kind == NetOpKind::AllReduce || kind == NetOpKind::ReduceScatter ||
         kind == NetOpKind::Reduce;
}
bool usesBlocks(NetOpKind kind) {
  return kind == NetOpKind::ReduceScatter || kind == NetOpKind::AllGather ||
         kind == NetOpKind::Gather || kind == NetOpKind::Scatter || kind == NetOpKind::AllToAll;
}
bool usesCount(NetOpKind kind) {
  return kind == NetOpKind::AllReduce || kind == NetOpKind::Broadcast ||
         kind == NetOpKind::Reduce || kind == NetOpKind::Send || kind == NetOpKind::Recv;
}
bool hasRoot(NetOpKind kind) {
  return kind == NetOpKind::Broadcast || kind == NetOpKind::Reduce || kind == NetOpKind::Gather ||
         kind == NetOpKind::Scatter || kind == NetOpKind::Send || kind == NetOpKind::Recv;
}

Status bad(const NetOpSpec& spec, const std::string& what) {
  return invalidArgument(std::string(netOpKindName(spec.kind)) + ": " + what);
}

// A per-node layout of element counts and offsets: sizes, overflow, and no two blocks sharing a
// byte. Sets *extent to the elements the buffer must hold.
Status checkLayout(const NetOpSpec& spec, const char* name, const std::vector<uint64_t>& counts,
                   const std::vector<uint64_t>& givenOffsets, uint64_t* extent) {
  const size_t n = spec.peers.size();
  if (counts.size() != n) return bad(spec, std::string(name) + " counts: one per node expected");
  if (!givenOffsets.empty() && givenOffsets.size() != n) {
    return bad(spec, std::string(name) + " offsets: one per node, or none, expected");
  }
  const uint64_t maxElements = std::numeric_limits<size_t>::max() / elementBytes(spec);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) of non-empty blocks
  uint64_t total = 0;
  const std::vector<uint64_t> offsets = layoutOffsets(counts, givenOffsets);
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] > maxElements || offsets[i] > maxElements - counts[i]) {
      return bad(spec, std::string(name) + " block of node " + std::to_string(i) + " overflows");
    }
    if (counts[i] > 0) ranges.emplace_back(offsets[i], offsets[i] + counts[i]);
    total = std::max(total, offsets[i] + counts[i]);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return bad(spec, std::string(name) + " blocks overlap");
    }
  }
  *extent = total;
  return okStatus();
}

Status validate(const NetOpSpec& spec) {
  if (spec.transport == nullptr) return bad(spec, "no transport");
  const size_t n = spec.peers.size();
  if (n == 0) return bad(spec, "no nodes");
  if (spec.self >= n) return bad(spec, "self " + std::to_string(spec.self) + " out of range");
  if (spec.options.maxInFlight == 0) return bad(spec, "maxInFlight must be at least 1");
  if (spec.options.chunkBytes == 0) return bad(spec, "chunkBytes must be at least 1");
  if (spec.sendReady && spec.kind != NetOpKind::Send) return bad(spec, "sendReady is for send");
  if (spec.onLanded && spec.kind != NetOpKind::Recv) return bad(spec, "onLanded is for recv");
  if (spec.onSent && spec.kind != NetOpKind::Send) return bad(spec, "onSent is for send");
  if (spec.recvReady && spec.kind != NetOpKind::Recv) return bad(spec, "recvReady is for recv");
  if (spec.ringBytes != 0) {
    if (spec.kind != NetOpKind::Send && spec.kind != NetOpKind::Recv) {
      return bad(spec, "only send and recv take a ring");
    }
    if (spec.ringBytes % spec.options.chunkBytes != 0) {
      return bad(spec, "ringBytes " + std::to_string(spec.ringBytes) +
                           " is not a multiple of chunkBytes " +
                           std::to_string(spec.options.chunkBytes));
    }
  }
  if (spec.memory != transport::MemoryKind::Host) {
    if (spec.kind != NetOpKind::Send && spec.kind != NetOpKind::Recv) {
      return bad(spec, std::string("only send and recv take ") +
                           transport::memoryKindName(spec.memory) + " memory");
    }
    if (!spec.transport->movesMemory(spec.memory)) {
      return bad(spec, std::string("the transport moves no ") +
                           transport::memoryKindName(spec.memory) + " memory");
    }
  }
  if (spec.kind == NetOpKind::Barrier) return okStatus();

  if (isReduction(spec.kind) && spec.redop == RedOp::Avg && spec.finalDivisor == 0) {
    return bad(spec, "avg needs finalDivisor (the communicator's rank count)");
  }
  if (hasRoot(spec.kind) && spec.root >= n) {
    return bad(spec, "root " + std::to_string(spec.root) + " out of range");
  }
  if ((spec.kind == NetOpKind::Send || spec.kind == NetOpKind::Recv) && spec.root == spec.self) {
    return bad(spec, "peer node is this node");
  }
  uint64_t elements = 0;
  if (usesCount(spec.kind)) {
    if (spec.count > std::numeric_limits<size_t>::max() / elementBytes(spec)) {
      return bad(spec, "count overflows");
    }
    elements = spec.count;
  }
  if (usesBlocks(spec.kind)) {
    HC_RETURN_IF_ERROR(checkLayout(spec, "block", spec.blockCounts, spec.blockOffsets, &elements));
  }
  if (elements > 0 && spec.buffer == nullptr) return bad(spec, "no buffer");
  if (spec.kind == NetOpKind::AllToAll) {
    uint64_t sendElements = 0;
    HC_RETURN_IF_ERROR(checkLayout(spec, "send", spec.sendCounts, spec.sendOffsets, &sendElements));
    if (sendElements > 0 && spec.sendBuffer == nullptr) return bad(spec, "no send buffer");
    if (spec.sendCounts[spec.self] != spec.blockCounts[spec.self]) {
      return bad(spec, "this node's send and receive blocks differ in size");
    }
    const auto* send = static_cast<const uint8_t*>(spec.sendBuffer);
    const auto* recv = static_cast<const uint8_t*>(spec.buffer);
    const size_t bytesPerElement = elementBytes(spec);
    if (sendElements > 0 && elements > 0 && send < recv + elements * bytesPerElement &&
        recv < send + sendElements * bytesPerElement) {
      return bad(spec, "send and receive buffers overlap");
    }
  }
  return okStatus();
}

// True when the op moves no data at all: every node knows it, so nobody sends anything.
bool movesNothing(const NetOpSpec& spec) {
  if (usesCount(spec.kind))
    return spec.count == 0 && spec.kind != NetOpKind::Send && spec.kind != NetOpKind::Recv;
  if (!usesBlocks(spec.kind)) return false;
  auto zero = [](const std::vector<uint64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](uint64_t c) { return c == 0; });
  };
  return zero(spec.blockCounts) && zero(spec.sendCounts);
}

Schedule allreduceSchedule(const NetOpSpec& spec) {
  AllreduceAlgo algo = spec.options.allreduceAlgo;
  if (algo == AllreduceAlgo::Auto) {
    const uint64_t bytes = spec.count * elementBytes(spec);
    algo =
        bytes >= spec.options.ringMinBytes ? AllreduceAlgo::Ring : AllreduceAlgo::RecursiveDoubling;
  }
  return algo == AllreduceAlgo::Ring ? ringAllreduce(spec) : recursiveDoublingAllreduce(spec);
}

Schedule buildSchedule(const NetOpSpec& spec) {
  switch (spec.kind) {
    case NetOpKind::AllReduce:
      return allreduceSchedule(spec);
    case NetOpKind::ReduceScatter:
      return ringReduceScatter(spec);
    case NetOpKind::AllGather:
      return ringAllgather(spec);
    case NetOpKind::Broadcast:
      return chainBroadcast(spec);
    case NetOpKind::Reduce:
      return chainReduce(spec);
    case NetOpKind::AllToAll:
      return pairwiseAllToAll(spec);
    case NetOpKind::Gather:
      return directGather(spec);
    case NetOpKind::Scatter:
      return directScatter(spec);
    case NetOpKind::Send:
    case NetOpKind::Recv:
      return pointToPoint(spec);
    case NetOpKind::Barrier:
      return disseminationBarrier(spec);
  }
  HC_CHECK(false && "every NetOpKind has a schedule");
  return {};
}

}  // namespace

const char* netOpKindName(NetOpKind kind) {
  switch (kind) {
    case NetOpKind::AllReduce:
      return "allreduce";
    case NetOpKind::ReduceScatter:
      return "reduce_scatter";
    case NetOpKind::AllGather:
      return "allgather";
    case NetOpKind::Broadcast:
      return "broadcast";
    case NetOpKind::Reduce:
      return "reduce";
    case NetOpKind::AllToAll:
      return "alltoall";
    case NetOpKind::Gather:
      return "gather";
    case NetOpKind::Scatter:
      return "scatter";
    case NetOpKind::Send:
      return "send";
    case NetOpKind::Recv:
      return "recv";
    case NetOpKind::Barrier:
      return "barrier";
  }
  return "unknown";
}

const char* allreduceAlgoName(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::Auto:
      return "auto";
    case AllreduceAlgo::Ring:
      return "ring";
    case AllreduceAlgo::RecursiveDoubling:
      return "recursive_doubling";
  }
  return "unknown";
}

Result<AllreduceAlgo> parseAllreduceAlgo(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "auto") return AllreduceAlgo::Auto;
  if (lower == "ring") return AllreduceAlgo::Ring;
  if (lower == "rd" || lower == "recursive_doubling") return AllreduceAlgo::RecursiveDoubling;
  return invalidArgument("unknown allreduce algorithm \"" + std::string(name) +
                         "\" (auto, ring, rd, recursive_doubling)");
}

RedOp interNodeRedop(RedOp redop) {
  return redop == RedOp::Avg || redop == RedOp::PreMulSum ? RedOp::Sum : redop;
}

Result<NetOpPtr> makeNetOp(const NetOpSpec& spec) {
  HC_RETURN_IF_ERROR(validate(spec));
  Schedule schedule;
  if (movesNothing(spec)) {
    schedule.algorithm = "empty";  // count 0: a local no-op, as in NCCL
  } else {
    schedule = buildSchedule(spec);
  }
  return NetOpPtr(std::make_unique<ScheduleRunner>(spec, std::move(schedule)));
}

}  // namespace hc::coll::net
