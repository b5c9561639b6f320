// NodePlan end to end: for each placement of ranks over nodes, every collective (each operator,
// root and dtype; in place and out of place by NCCL's rules; counts 0, 1, 7, 1000) runs through
// every node's plan and the NetOps over one loopback fabric, and every rank's memory is compared
// with results computed here: reductions from seeded values whose sums are exact in any order,
// data movement from random bytes. Scratch pools live for a whole test, so later cases get
// blocks still holding earlier cases' data.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"
#include "tests/unit/daemon/coll/hier/node_plan_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::coll::hier::testing {
namespace {

using net::AllreduceAlgo;
using net::testing::Contribution;
using net::testing::dtypeLabel;
using net::testing::encode;
using net::testing::kAllOps;
using net::testing::kAvg;
using net::testing::kBfloat16;
using net::testing::kFloat16;
using net::testing::kFloat32;
using net::testing::kFloat64;
using net::testing::kInt64;
using net::testing::kInt8;
using net::testing::kPreMulSum;
using net::testing::kSum;
using net::testing::opLabel;
using net::testing::randomValues;
using net::testing::reference;
using net::testing::sizeOf;

const uint8_t kDtypes[] = {kFloat32, kInt64, kBfloat16, kInt8, kFloat16, kFloat64};
const uint64_t kCounts[] = {0, 1, 7, 1000};
// float32 buffers past 256 KiB: streaming stores in the kernels, the ring for Auto allreduce.
constexpr uint64_t kLargeCount = 70001;
// PreMulSum scalars by rank: with |x| <= 8 and 6 ranks every sum stays below 2^8, exact in bf16.
const int64_t kScalars[] = {2, -1, 3, 1, -3, 2};

struct OpCase {
  OpType type;
  uint8_t dtype;
  uint8_t redop = kSum;
  uint64_t count = 0;
  int root = -1;
  bool inPlace = false;
  AllreduceAlgo algo = AllreduceAlgo::Auto;
};

std::string label(const OpCase& c, const char* placement) {
  std::string s = opName(c.type);
  if (isReduction(c.type)) s += " " + opLabel(c.redop);
  s += " " + dtypeLabel(c.dtype) + " count " + std::to_string(c.count);
  if (hasRoot(c.type)) s += " root " + std::to_string(c.root);
  s += c.inPlace ? " in place" : " out of place";
  if (c.type == OpType::AllReduce && c.algo != AllreduceAlgo::Auto) {
    s += c.algo == AllreduceAlgo::Ring ? " ring" : " rd";
  }
  return s + ", placement " + placement;
}

// Elements of every rank's send buffer (a root's, for scatter).
uint64_t inputElems(const OpCase& c, uint64_t nranks) {
  const bool perPeer =
      c.type == OpType::ReduceScatter || c.type == OpType::Scatter || c.type == OpType::AllToAll;
  return perPeer ? nranks * c.count : c.count;
}

// NCCL's buffers for this rank. In place: allgather send = recv + rank * count, reduce-scatter
// recv = send + rank * count, gather/scatter likewise at the root, the others send == recv.
BufferShape shapeOf(const OpCase& c, int rank, uint64_t nranks) {
  const uint64_t k = c.count;
  const uint64_t at = static_cast<uint64_t>(rank) * k;
  const bool root = rank == c.root;
  switch (c.type) {
    case OpType::AllReduce:
    case OpType::Broadcast:
      return {true, true, k, k, c.inPlace, 0};
    case OpType::Reduce:  // recv only at the root; in place every rank passes send == recv
      return {true, root, k, root ? k : 0, c.inPlace, 0};
    case OpType::AllGather:
      return {true, true, k, nranks * k, c.inPlace, at};
    case OpType::ReduceScatter:
      return {true, true, nranks * k, k, c.inPlace, at};
    case OpType::Gather:
      return {true, root, k, root ? nranks * k : 0, c.inPlace && root, at};
    case OpType::Scatter:
      return {root, true, root ? nranks * k : 0, k, c.inPlace && root, at};
    case OpType::AllToAll:
      return {true, true, nranks * k, nranks * k, c.inPlace, 0};
    default:
      return {};
  }
}

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& bytes, size_t esz, uint64_t first,
                           uint64_t count) {
  const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(first * esz);
  return {begin, begin + static_cast<std::ptrdiff_t>(count * esz)};
}

void append(std::vector<uint8_t>& out, const std::vector<uint8_t>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

uint64_t scalarBits(uint8_t dtype, int64_t value) {
  const std::vector<uint8_t> bytes = encode(dtype, Contribution{value});
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data(), bytes.size());
  return bits;
}

// Every rank's values reduced element by element; PreMulSum scales each rank's first (exact:
// small integers in floats, wrapping in int64).
std::vector<uint8_t> reduced(const OpCase& c, const std::vector<Contribution>& values) {
  if (c.redop != kPreMulSum) return reference(c.dtype, c.redop, values, values.size());
  std::vector<Contribution> scaled = values;
  for (size_t r = 0; r < scaled.size(); ++r) {
    for (int64_t& x : scaled[r]) {
      x = static_cast<int64_t>(static_cast<uint64_t>(kScalars[r]) * static_cast<uint64_t>(x));
    }
  }
  return reference(c.dtype, kSum, scaled, scaled.size());
}

class NodePlanTest : public ::testing::TestWithParam<NamedPlacement> {
 protected:
  NodePlanTest() : world_(GetParam().ranksOfNode) {}
  void TearDown() override { checker_.report(); }

  int nranks() const { return world_.nranks(); }

  // Small cases in tiny chunks, so that a 1000-element buffer crosses in several; large ones
  // with the defaults.
  static net::NetOpOptions options(const OpCase& c) {
    net::NetOpOptions o;
    if (c.count < kLargeCount) {
      o.chunkBytes = 512;
      o.maxInFlight = 2;
    }
    o.allreduceAlgo = c.algo;
    return o;
  }

  // One collective over every rank: inputs, buffers, the run, and every rank's memory checked.
  void runCase(const OpCase& c) {
    const uint64_t n = static_cast<uint64_t>(nranks());
    const size_t esz = sizeOf(c.dtype);
    const std::string name = label(c, GetParam().name);
    ++seed_;
    // Inputs: exact values for reductions, random bytes for data movement.
    std::vector<Contribution> values(n);
    std::vector<std::vector<uint8_t>> input(n);
    for (uint64_t r = 0; r < n; ++r) {
      const uint64_t seed = seed_ * 64 + r;
      if (isReduction(c.type)) {
        values[r] = randomValues(c.dtype, c.redop, inputElems(c, n), seed);
        input[r] = encode(c.dtype, values[r]);
      } else {
        input[r] = randomBytes(inputElems(c, n) * esz, seed);
      }
    }
    std::vector<uint8_t> result;  // reductions: the full reduced vector
    if (isReduction(c.type)) result = reduced(c, values);

    std::vector<std::unique_ptr<RankMemory>> memory;
    std::vector<RankBuffers> byRank;
    for (int r = 0; r < nranks(); ++r) {
      const BufferShape shape = shapeOf(c, r, n);
      const uint64_t scalar =
          c.redop == kPreMulSum && isReduction(c.type) ? scalarBits(c.dtype, kScalars[r]) : 0;
      memory.push_back(std::make_unique<RankMemory>(
          c.dtype, shape, shape.hasSend ? input[r] : std::vector<uint8_t>{}, scalar));
      byRank.push_back(memory.back()->buffers());
      expectOutput(c, r, input, result, *memory.back());
    }

    checker_.beginCase();
    const LocalOp op{c.type, Dtype{c.dtype}, RedOp{c.redop}, c.root, c.count};
    const Status run = world_.runCollective(op, byRank, options(c));
    if (!run.isOk()) return checker_.runFailed(name + ": " + run.toString());
    for (int r = 0; r < nranks(); ++r) checker_.check(name, r, *memory[r]);
  }

  // What rank r's receive buffer must end holding, computed from the inputs alone.
  void expectOutput(const OpCase& c, int r, const std::vector<std::vector<uint8_t>>& input,
                    const std::vector<uint8_t>& result, RankMemory& memory) const {
    const uint64_t n = static_cast<uint64_t>(nranks());
    const size_t esz = sizeOf(c.dtype);
    const uint64_t ur = static_cast<uint64_t>(r);
    std::vector<uint8_t> want;
    switch (c.type) {
      case OpType::AllReduce:
        return memory.expectAtRecv(result);
      case OpType::Reduce:
        if (r == c.root) memory.expectAtRecv(result);
        return;  // elsewhere nothing changes, in place or not
      case OpType::Broadcast:
        return memory.expectAtRecv(input[static_cast<size_t>(c.root)]);
      case OpType::AllGather:
        for (uint64_t s = 0; s < n; ++s) append(want, input[s]);
        return memory.expectAtRecv(want);
      case OpType::ReduceScatter:
        return memory.expectAtRecv(slice(result, esz, ur * c.count, c.count));
      case OpType::Gather:
        if (r != c.root) return;
        for (uint64_t s = 0; s < n; ++s) append(want, input[s]);
        return memory.expectAtRecv(want);
      case OpType::Scatter:
        return memory.expectAtRecv(
            slice(input[static_cast<size_t>(c.root)], esz, ur * c.count, c.count));
      case OpType::AllToAll:
        for (uint64_t s = 0; s < n; ++s) append(want, slice(input[s], esz, ur * c.count, c.count));
        return memory.expectAtRecv(want);
      default:
        ADD_FAILURE() << "test bug: no expectation for " << opName(c.type);
    }
  }

  // Every dtype x count x {out of place, in place}, with `fill` setting the rest of the case.
  template <typename Fill>
  void forEachCase(OpType type, Fill fill) {
    for (uint8_t dtype : kDtypes) {
      for (uint64_t count : kCounts) {
        for (bool inPlace : {false, true}) fill(OpCase{type, dtype, kSum, count, -1, inPlace});
      }
    }
  }

  HierWorld world_;
  Checker checker_;
  uint64_t seed_ = 0;  // distinct data in every case
};

TEST_P(NodePlanTest, AllReduceMatchesReferenceOnEveryRank) {
  forEachCase(OpType::AllReduce, [&](OpCase c) {
    for (uint8_t redop : kAllOps) {
      for (AllreduceAlgo algo : {AllreduceAlgo::RecursiveDoubling, AllreduceAlgo::Ring}) {
        c.redop = redop;
        c.algo = algo;
        runCase(c);
      }
    }
  });
}

TEST_P(NodePlanTest, BroadcastFromEveryRootReachesEveryRank) {
  forEachCase(OpType::Broadcast, [&](OpCase c) {
    for (c.root = 0; c.root < nranks(); ++c.root) runCase(c);
  });
}

TEST_P(NodePlanTest, ReduceToALocalOrRemoteRootLeavesOtherRanksAlone) {
  forEachCase(OpType::Reduce, [&](OpCase c) {
    for (uint8_t redop : kAllOps) {
      c.redop = redop;
      for (c.root = 0; c.root < nranks(); ++c.root) runCase(c);
    }
  });
}

TEST_P(NodePlanTest, AllGatherPutsEveryRankInRankOrder) {
  forEachCase(OpType::AllGather, [&](const OpCase& c) { runCase(c); });
}

TEST_P(NodePlanTest, ReduceScatterGivesEveryRankItsReducedSlice) {
  forEachCase(OpType::ReduceScatter, [&](OpCase c) {
    for (uint8_t redop : kAllOps) {
      c.redop = redop;
      runCase(c);
    }
  });
}

TEST_P(NodePlanTest, GatherToEveryRootInRankOrder) {
  forEachCase(OpType::Gather, [&](OpCase c) {
    for (c.root = 0; c.root < nranks(); ++c.root) runCase(c);
  });
}

TEST_P(NodePlanTest, ScatterFromEveryRootGivesEveryRankItsSlice) {
  forEachCase(OpType::Scatter, [&](OpCase c) {
    for (c.root = 0; c.root < nranks(); ++c.root) runCase(c);
  });
}

TEST_P(NodePlanTest, AllToAllDeliversEveryPairsBlock) {
  forEachCase(OpType::AllToAll, [&](const OpCase& c) { runCase(c); });
}

TEST_P(NodePlanTest, LargeBuffersInDefaultChunks) {
  const int last = nranks() - 1;
  for (bool inPlace : {false, true}) {
    for (uint8_t redop : {kSum, kAvg, kPreMulSum}) {
      for (uint8_t dtype : {kFloat32, kBfloat16}) {
        runCase(OpCase{OpType::AllReduce, dtype, redop, kLargeCount, -1, inPlace});
      }
    }
    runCase(OpCase{OpType::ReduceScatter, kFloat32, kSum, kLargeCount, -1, inPlace});
    runCase(OpCase{OpType::Reduce, kFloat32, kSum, kLargeCount, 1, inPlace});
    runCase(OpCase{OpType::Broadcast, kFloat32, kSum, kLargeCount, last, inPlace});
    runCase(OpCase{OpType::AllGather, kFloat32, kSum, kLargeCount, -1, inPlace});
    runCase(OpCase{OpType::Gather, kFloat32, kSum, kLargeCount, last, inPlace});
    runCase(OpCase{OpType::Scatter, kFloat32, kSum, kLargeCount, 0, inPlace});
    runCase(OpCase{OpType::AllToAll, kFloat32, kSum, kLargeCount, -1, inPlace});
  }
}

TEST_P(NodePlanTest, SendRecvBetweenRanksOnDifferentNodes) {
  const uint64_t n = static_cast<uint64_t>(nranks());
  for (uint8_t dtype : kDtypes) {
    for (uint64_t count : kCounts) {
      for (int from = 0; from < nranks(); ++from) {
        for (int to = 0; to < nranks(); ++to) {
          if (world_.nodeOf(from) == world_.nodeOf(to)) continue;  // the engine's local path
          const std::string name = "send/recv " + dtypeLabel(dtype) + " count " +
                                   std::to_string(count) + " rank " + std::to_string(from) +
                                   " -> " + std::to_string(to) + ", placement " + GetParam().name;
          const std::vector<uint8_t> data = randomBytes(count * sizeOf(dtype), ++seed_ * 64 + n);
          RankMemory sender(dtype, BufferShape{true, false, count, 0, false, 0}, data);
          RankMemory receiver(dtype, BufferShape{false, true, 0, count, false, 0}, {});
          receiver.expectAtRecv(data);
          std::vector<std::optional<NodeWork>> work(world_.nodes());
          work[world_.nodeOf(from)] = NodeWork{
              LocalOp{OpType::Send, Dtype{dtype}, RedOp{0}, to, count}, {sender.buffers()}};
          work[world_.nodeOf(to)] = NodeWork{
              LocalOp{OpType::Recv, Dtype{dtype}, RedOp{0}, from, count}, {receiver.buffers()}};
          checker_.beginCase();
          const Status run = world_.run(work, options(OpCase{OpType::Send, dtype, kSum, count}));
          if (!run.isOk()) {
            checker_.runFailed(name + ": " + run.toString());
            continue;
          }
          checker_.check(name, from, sender);
          checker_.check(name, to, receiver);
        }
      }
    }
  }
}

TEST_P(NodePlanTest, BarrierCompletesOnEveryNode) {
  const std::vector<RankBuffers> none(static_cast<size_t>(nranks()));
  for (int k = 0; k < 3; ++k) {
    checker_.beginCase();
    const Status run = world_.runCollective(LocalOp{OpType::Barrier, Dtype{0}, RedOp{0}, -1, 0},
                                            none, options(OpCase{OpType::Barrier, 0}));
    if (!run.isOk()) checker_.runFailed(std::string("barrier: ") + run.toString());
  }
}

std::string placementName(const ::testing::TestParamInfo<NamedPlacement>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Placements, NodePlanTest, ::testing::ValuesIn(kPlacements), placementName);

}  // namespace
}  // namespace hc::coll::hier::testing
