// SliceStaging: which bytes of an op's buffers make up each slice (checked against an independent
// enumeration of every element), and the staging itself on host memory (used where it lies when
// contiguous, packed otherwise) and on a simulated device, including a copy that fails midway.
#include "daemon/staging/slice_staging.h"

#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "common/simdev/sim_allocation.h"
#include "daemon/device/sim/sim_node.h"

namespace hc::staging {
namespace {

constexpr OpType kSliceable[] = {OpType::AllReduce, OpType::Broadcast,     OpType::Reduce,
                                 OpType::AllGather, OpType::ReduceScatter, OpType::AllToAll,
                                 OpType::Gather,    OpType::Scatter};

// Blocks of each side, written out per op rather than taken from the code under test.
int expectedBlocks(OpType type, bool send, int nranks) {
  if (type == OpType::AllToAll) return nranks;
  if (type == OpType::AllGather || type == OpType::Gather) return send ? 1 : nranks;
  if (type == OpType::ReduceScatter || type == OpType::Scatter) return send ? nranks : 1;
  return 1;
}

// Element indices (in the whole buffer) of one slice, packed: block by block, in order.
std::vector<uint64_t> expectedElements(int blocks, uint64_t total, uint64_t first, uint64_t count) {
  std::vector<uint64_t> out;
  for (int b = 0; b < blocks; ++b) {
    for (uint64_t e = first; e < first + count; ++e) out.push_back(b * total + e);
  }
  return out;
}

std::vector<uint64_t> gathered(const std::vector<SlicePiece>& pieces, size_t esz) {
  std::vector<uint64_t> out;
  for (const auto& p : pieces) {
    EXPECT_EQ(p.offset % esz, 0u);
    EXPECT_EQ(p.bytes % esz, 0u);
    for (uint64_t b = 0; b < p.bytes; b += esz) out.push_back((p.offset + b) / esz);
  }
  return out;
}

TEST(SlicePiecesTest, EverySliceOfEveryOpPacksItsElementsBlockByBlock) {
  for (OpType type : kSliceable) {
    for (int nranks : {1, 3}) {
      for (uint64_t perSlice : {1, 3, 7, 9}) {
        const uint64_t total = 7;  // 3 does not divide it: the last slice is short
        for (const bool send : {true, false}) {
          std::vector<int> seen(expectedBlocks(type, send, nranks) * total, 0);
          for (uint64_t first = 0; first < total; first += perSlice) {
            const uint64_t count = std::min(perSlice, total - first);
            const auto pieces = slicePieces(type, send, nranks, 2, total, first, count);
            const auto got = gathered(pieces, 2);
            EXPECT_EQ(got,
                      expectedElements(expectedBlocks(type, send, nranks), total, first, count))
                << "op " << int(type) << " nranks " << nranks << " first " << first;
            for (uint64_t e : got) ++seen.at(e);
            if (count == total) EXPECT_EQ(pieces.size(), 1u);  // contiguous: one copy
          }
          EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(seen.size()))
              << "every element in exactly one slice, op " << int(type);
        }
      }
    }
  }
}

TEST(SlicePiecesTest, SliceCountBoundsTheLargerSide) {
  EXPECT_EQ(sliceCount(OpType::AllReduce, 4, 4, 4096), 1024u);
  EXPECT_EQ(sliceCount(OpType::AllGather, 4, 4, 4096), 256u);  // 4 blocks received
  EXPECT_EQ(sliceCount(OpType::ReduceScatter, 4, 2, 100003), 12500u);
  EXPECT_EQ(sliceCount(OpType::AllToAll, 8, 8, 16), 1u);  // never 0
  EXPECT_FALSE(sliceable(OpType::Barrier));
  EXPECT_FALSE(sliceable(OpType::Send));
  EXPECT_TRUE(sliceable(OpType::Scatter));
}

// An allgather of 7 ints per rank among 3 ranks, in slices of 3, on host memory: the send side
// (contiguous) is used where it lies, the receive side is packed and written back.
TEST(SliceStagingTest, HostMemoryIsUsedInPlaceWhenContiguousAndPackedOtherwise) {
  const int nranks = 3;
  const uint64_t total = 7;
  std::vector<int32_t> send(total), recv(nranks * total, -1);
  std::iota(send.begin(), send.end(), 100);
  Operand op;
  op.type = OpType::AllGather;
  op.count = total;
  op.buffers.send = reinterpret_cast<const uint8_t*>(send.data());
  op.buffers.recv = reinterpret_cast<uint8_t*>(recv.data());
  std::vector<Operand> ops{op};
  StagingPool pool;
  DeviceCopier copier(1 << 20);
  SliceStaging staging(OpType::AllGather, nranks, 4, total, 3, &pool, &copier);
  ASSERT_EQ(staging.slices(), 3u);
  for (size_t k = 0; k < staging.slices(); ++k) {
    std::vector<coll::RankBuffers> bufs(1);
    ASSERT_TRUE(staging.stageIn(ops, k, bufs).isOk());
    staging.settle();
    const uint64_t count = staging.countOf(k);
    EXPECT_EQ(bufs[0].send, reinterpret_cast<const uint8_t*>(send.data() + 3 * k));
    auto* packed = reinterpret_cast<int32_t*>(bufs[0].recv);
    ASSERT_NE(packed, nullptr);
    EXPECT_TRUE(packed < recv.data() || packed >= recv.data() + recv.size());
    // What the slice's allgather would leave: rank b's element e is 1000 * b + e.
    for (int b = 0; b < nranks; ++b) {
      for (uint64_t j = 0; j < count; ++j) packed[b * count + j] = 1000 * b + int(3 * k + j);
    }
    staging.stageOut(ops, k);
    staging.settle();
  }
  EXPECT_TRUE(staging.failure().isOk());
  uint64_t wrong = 0;
  for (int b = 0; b < nranks; ++b) {
    for (uint64_t e = 0; e < total; ++e) wrong += recv[b * total + e] != int(1000 * b + e);
  }
  EXPECT_EQ(wrong, 0u);
}

class SliceStagingDeviceTest : public ::testing::Test {
 protected:
  ~SliceStagingDeviceTest() override {
    if (device_ != nullptr) [[maybe_unused]]
      Status s = device_->releaseBuffer(imported_);
  }

  void start(uint64_t failCopyAt) {
    device::SimNodeOptions sim;
    sim.nvidia = 1;
    sim.faults.failCopyAt = failCopyAt;
    ASSERT_TRUE(device::addSimDevices(registry_, sim, nullptr).isOk());
    auto dev = registry_.find(device::Vendor::Nvidia, 0);
    ASSERT_TRUE(dev.isOk());
    auto a = simdev::SimAllocation::create(kBytes, "slice-test");
    ASSERT_TRUE(a.isOk());
    memory_ = std::move(a.value());
    device::BufferHandle handle;
    handle.type = device::MemoryType::Sim;
    handle.fd = memory_.fd();
    handle.size = kBytes;
    auto imported = (*dev)->importBuffer(handle);
    ASSERT_TRUE(imported.isOk()) << imported.status().message();
    device_ = *dev;
    imported_ = *imported;
  }

  // A reduce-scatter of `total` floats per rank among `nranks` ranks, in place: the send side
  // is the whole region start, the receive side this rank's block of it (rank 1).
  Operand reduceScatterOp(int nranks, uint64_t total) {
    Operand op;
    op.type = OpType::ReduceScatter;
    op.count = total;
    auto* region = static_cast<uint8_t*>(imported_.ptr);
    op.send = {device_, region, 0, nranks * total * 4};
    op.recv = {device_, region, total * 4, total * 4};
    return op;
  }

  static constexpr uint64_t kBytes = 1 << 16;
  device::DeviceRegistry registry_;
  simdev::SimAllocation memory_;
  device::Device* device_ = nullptr;
  device::ImportedBuffer imported_;
};

TEST_F(SliceStagingDeviceTest, ReduceScatterInPlaceOnADeviceRoundTripsEverySlice) {
  start(0);
  const int nranks = 3;
  const uint64_t total = 1001;  // slices of 250: the last one is 1 element
  auto* f = reinterpret_cast<float*>(memory_.data());
  for (uint64_t i = 0; i < nranks * total; ++i) f[i] = static_cast<float>(i);
  std::vector<Operand> ops{reduceScatterOp(nranks, total)};
  StagingPool pool;
  DeviceCopier copier(999);  // copies in chunks that divide nothing
  SliceStaging staging(OpType::ReduceScatter, nranks, 4, total,
                       sliceCount(OpType::ReduceScatter, nranks, 4, 3000), &pool, &copier);
  ASSERT_EQ(staging.slices(), 5u);
  uint64_t wrongIn = 0;
  for (size_t k = 0; k < staging.slices(); ++k) {
    std::vector<coll::RankBuffers> bufs(1);
    ASSERT_TRUE(staging.stageIn(ops, k, bufs).isOk());
    staging.settle();
    const uint64_t first = 250 * k, count = staging.countOf(k);
    const auto* in = reinterpret_cast<const float*>(bufs[0].send);
    for (int b = 0; b < nranks; ++b) {
      for (uint64_t j = 0; j < count; ++j) {
        wrongIn += in[b * count + j] != static_cast<float>(b * total + first + j);
      }
    }
    // The slice's result: the sum of the three blocks' elements.
    auto* out = reinterpret_cast<float*>(bufs[0].recv);
    for (uint64_t j = 0; j < count; ++j) {
      out[j] = static_cast<float>(3 * (first + j) + 3 * total);
    }
    staging.stageOut(ops, k);
    staging.settle();
  }
  EXPECT_EQ(wrongIn, 0u);
  ASSERT_TRUE(staging.failure().isOk()) << staging.failure().message();
  uint64_t wrongOut = 0;
  for (uint64_t e = 0; e < total; ++e) {
    wrongOut += f[total + e] != static_cast<float>(3 * e + 3 * total);
  }
  EXPECT_EQ(wrongOut, 0u);
  EXPECT_EQ(f[0], 0.0f);  // block 0 is not this rank's: untouched
  EXPECT_EQ(f[2 * total + 5], static_cast<float>(2 * total + 5));
}

TEST_F(SliceStagingDeviceTest, AFailedCopyIsKeptAndLaterSlicesStillGetBuffersWithoutCopies) {
  start(4);  // slice 0 copies 3 pieces in, then 1 out; the 4th copy (slice 0's out) fails
  const int nranks = 3;
  const uint64_t total = 40;
  std::vector<Operand> ops{reduceScatterOp(nranks, total)};
  StagingPool pool;
  DeviceCopier copier(1 << 20);
  SliceStaging staging(OpType::ReduceScatter, nranks, 4, total, 10, &pool, &copier);
  for (size_t k = 0; k < staging.slices(); ++k) {
    std::vector<coll::RankBuffers> bufs(1);
    ASSERT_TRUE(staging.stageIn(ops, k, bufs).isOk());
    staging.settle();
    EXPECT_NE(bufs[0].send, nullptr);
    EXPECT_NE(bufs[0].recv, nullptr);
    staging.stageOut(ops, k);
    staging.settle();
  }
  ASSERT_FALSE(staging.failure().isOk());
  EXPECT_EQ(staging.failure().code(), Code::DeviceError);
  EXPECT_NE(staging.failure().message().find("copy on sim nvidia:0 failed"), std::string::npos)
      << staging.failure().message();
}

}  // namespace
}  // namespace hc::staging
