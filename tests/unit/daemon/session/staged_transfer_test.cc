// StagedTransfer: sends and receives of device memory staged through host memory beside the wire,
// between nodes of a loopback fabric, on sim devices (real stream workers, simulated copy speed,
// injected faults). What must hold: the bytes arrive whole at every size, including sizes that
// neither the copy chunk nor the wire chunk divides; no wire chunk leaves before its bytes are out
// of the device; a receive is final only once its bytes are in the device; wire chunks leave while
// later copies still run; a copy that fails fails the op with a DeviceError and its peer too.
#include "daemon/session/staged_transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/device/sim/sim_device.h"
#include "tests/unit/daemon/coll/net/net_test_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::session {
namespace {

using coll::net::NetOp;
using coll::net::NetOpKind;
using coll::net::NetOpPtr;
using coll::net::NetOpSpec;
using coll::net::testing::Cluster;
using coll::net::testing::Outcome;

using coll::net::testing::kFloat32;
constexpr uint8_t kFill = 0xEE;  // what staging and destinations hold before anything arrives

std::unique_ptr<device::SimDevice> simDevice(device::Vendor vendor, uint32_t latencyUs,
                                             device::SimFaults faults = {}) {
  simdev::StreamTiming timing;
  timing.copyGBps = 1.0;
  timing.latencyUs = latencyUs;
  return std::make_unique<device::SimDevice>(vendor, 0, timing, faults, nullptr);
}

// A device allocation of `bytes` (at least one byte), freed with the device.
uint8_t* deviceBytes(device::Device& d, size_t bytes) {
  auto p = d.allocDevice(std::max<size_t>(bytes, 1));
  EXPECT_TRUE(p.isOk()) << p.status().toString();
  return p.isOk() ? static_cast<uint8_t*>(*p) : nullptr;
}

std::vector<uint8_t> seeded(size_t count, uint64_t seed) {
  return coll::net::testing::encode(kFloat32,
                                    coll::net::testing::randomValues(kFloat32, 0, count, seed));
}

size_t wrongElements(const uint8_t* got, const std::vector<uint8_t>& want) {
  size_t wrong = 0;
  for (size_t at = 0; at < want.size(); at += 4) {
    wrong += std::memcmp(got + at, want.data() + at, 4) != 0 ? 1 : 0;
  }
  return wrong;
}

// One end of a transfer between node 0 (sending) and node 1 (receiving).
NetOpSpec transferSpec(Cluster& cluster, bool send, size_t count, void* buffer, size_t wireChunk) {
  NetOpSpec spec = cluster.spec(send ? 0 : 1, send ? NetOpKind::Send : NetOpKind::Recv);
  spec.dtype = kFloat32;
  spec.root = send ? 1 : 0;
  spec.count = count;
  spec.buffer = buffer;
  spec.options.chunkBytes = wireChunk;
  spec.options.maxInFlight = 2;
  return spec;
}

// The staged end on `d`: device bytes, host staging (filled with kFill) and the op.
struct StagedEnd {
  uint8_t* onDevice = nullptr;
  std::vector<uint8_t> host;
  NetOpPtr op;
};

StagedEnd stagedEnd(Cluster& cluster, bool send, device::Device& d, TransferLanes& lanes,
                    size_t count, size_t copyChunk, size_t wireChunk) {
  StagedEnd end;
  const size_t bytes = count * 4;
  end.onDevice = deviceBytes(d, bytes);
  end.host.assign(std::max<size_t>(bytes, 1), kFill);
  if (!send) std::memset(end.onDevice, kFill, bytes);
  const StagedTransferPlan plan{&d, end.onDevice, end.host.data(), bytes, copyChunk, &lanes};
  auto op =
      makeStagedTransfer(transferSpec(cluster, send, count, end.host.data(), wireChunk), plan);
  EXPECT_TRUE(op.isOk()) << op.status().toString();
  if (op.isOk()) end.op = std::move(op.value());
  return end;
}

TEST(StagedTransferTest, DeviceToDeviceArrivesWholeAtEverySizeAndChunking) {
  // 300 µs per copy: a wire chunk that left before its copy ran would carry kFill bytes, and a
  // receive reported final before its copies ran would leave kFill in the device.
  auto nvidia = simDevice(device::Vendor::Nvidia, 300);
  auto amd = simDevice(device::Vendor::Amd, 300);
  TransferLanes lanes;
  struct Chunking {
    size_t copy;
    size_t wire;
  };
  for (const Chunking c : {Chunking{4096, 1000}, Chunking{1000, 4096}, Chunking{65536, 65536}}) {
    for (size_t count : {0, 1, 7, 1023, 4097, 100003}) {
      SCOPED_TRACE("count " + std::to_string(count) + ", copies of " + std::to_string(c.copy) +
                   ", wire chunks of " + std::to_string(c.wire));
      Cluster cluster(2);
      const std::vector<uint8_t> data = seeded(count, count + 11);
      StagedEnd from = stagedEnd(cluster, true, *nvidia, lanes, count, c.copy, c.wire);
      StagedEnd to = stagedEnd(cluster, false, *amd, lanes, count, c.copy, c.wire);
      ASSERT_TRUE(from.op && to.op);
      if (!data.empty()) std::memcpy(from.onDevice, data.data(), data.size());
      std::vector<Outcome> outcomes = cluster.runThreaded({from.op.get(), to.op.get()});
      EXPECT_TRUE(outcomes[0].status.isOk()) << outcomes[0].status.toString();
      EXPECT_TRUE(outcomes[1].status.isOk()) << outcomes[1].status.toString();
      EXPECT_EQ(wrongElements(to.onDevice, data), 0u) << "#wrong in the receiving device";
      EXPECT_STREQ(from.op->algorithm(), "send_staged");
      EXPECT_STREQ(to.op->algorithm(), "recv_staged");
    }
  }
}

TEST(StagedTransferTest, WireChunksLeaveWhileLaterCopiesOutOfTheDeviceStillRun) {
  // Four copies of 4 KiB, the fourth fails 50 ms after the third: by then the first three must
  // have reached the (host) receiver, or the send waited for every copy before the wire.
  device::SimFaults faults;
  faults.failCopyAt = 4;
  faults.slowStreamUs = 50'000;
  auto nvidia = simDevice(device::Vendor::Nvidia, 0, faults);
  TransferLanes lanes;
  Cluster cluster(2);
  const size_t count = 4096;  // 16 KiB
  const std::vector<uint8_t> data = seeded(count, 5);
  StagedEnd from = stagedEnd(cluster, true, *nvidia, lanes, count, 4096, 4096);
  ASSERT_TRUE(from.op);
  std::memcpy(from.onDevice, data.data(), data.size());
  std::vector<uint8_t> received(data.size(), kFill);
  auto to = coll::net::makeNetOp(transferSpec(cluster, false, count, received.data(), 4096));
  ASSERT_TRUE(to.isOk()) << to.status().toString();
  std::vector<Outcome> outcomes = cluster.runThreaded({from.op.get(), to->get()});

  EXPECT_EQ(outcomes[0].status.code(), Code::DeviceError) << outcomes[0].status.toString();
  EXPECT_NE(outcomes[0].status.message().find("staging copy out of sim nvidia:0 failed"),
            std::string::npos)
      << outcomes[0].status.toString();
  EXPECT_FALSE(outcomes[1].status.isOk()) << "the receiver learns of the sender's failure";
  EXPECT_NE(outcomes[1].status.code(), Code::Timeout) << outcomes[1].status.toString();
  const std::vector<uint8_t> firstThree(data.begin(), data.begin() + 3 * 4096);
  EXPECT_EQ(wrongElements(received.data(), firstThree), 0u)
      << "the chunks copied out before the fault were on the wire before it";
}

TEST(StagedTransferTest, AFailedCopyIntoTheDeviceFailsTheReceiveAndTheLaneRecovers) {
  device::SimFaults faults;
  faults.failCopyAt = 2;
  auto amd = simDevice(device::Vendor::Amd, 0, faults);
  TransferLanes lanes;
  const size_t count = 10000;
  const std::vector<uint8_t> data = seeded(count, 9);
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE(attempt == 0 ? "the copy fault" : "the next transfer on the same lanes");
    Cluster cluster(2);
    std::vector<uint8_t> sent = data;
    auto from = coll::net::makeNetOp(transferSpec(cluster, true, count, sent.data(), 4096));
    ASSERT_TRUE(from.isOk()) << from.status().toString();
    StagedEnd to = stagedEnd(cluster, false, *amd, lanes, count, 4096, 4096);
    ASSERT_TRUE(to.op);
    std::vector<Outcome> outcomes = cluster.runThreaded({from->get(), to.op.get()});
    EXPECT_NE(outcomes[0].status.code(), Code::Timeout) << outcomes[0].status.toString();
    if (attempt == 0) {
      EXPECT_EQ(outcomes[1].status.code(), Code::DeviceError) << outcomes[1].status.toString();
      EXPECT_NE(outcomes[1].status.message().find("staging copy into sim amd:0 failed"),
                std::string::npos)
          << outcomes[1].status.toString();
    } else {
      // The failed stream was dropped: a fresh one carries the next transfer.
      EXPECT_TRUE(outcomes[1].status.isOk()) << outcomes[1].status.toString();
      EXPECT_EQ(wrongElements(to.onDevice, data), 0u);
    }
  }
}

TEST(StagedTransferTest, ADeadSenderFailsTheReceiveAfterTheLandedChunksReachedTheDevice) {
  auto amd = simDevice(device::Vendor::Amd, 200);
  TransferLanes lanes;
  Cluster cluster(2);
  const size_t count = 50000;  // 200 KB in 1000-byte wire chunks, two in flight
  const std::vector<uint8_t> data = seeded(count, 3);
  std::vector<uint8_t> sent = data;
  auto from = coll::net::makeNetOp(transferSpec(cluster, true, count, sent.data(), 1000));
  ASSERT_TRUE(from.isOk()) << from.status().toString();
  StagedEnd to = stagedEnd(cluster, false, *amd, lanes, count, 4096, 1000);
  ASSERT_TRUE(to.op);
  std::vector<Outcome> outcomes = cluster.run({from->get(), to.op.get()}, 200000, [&](size_t r) {
    if (r == 6) cluster.kill(0);
  });
  EXPECT_FALSE(outcomes[1].status.isOk());
  EXPECT_NE(outcomes[1].status.code(), Code::Timeout) << outcomes[1].status.toString();
  // Final only after the copies of what had landed: those bytes are in the device.
  const std::vector<uint8_t> firstChunk(data.begin(), data.begin() + 1000);
  EXPECT_EQ(wrongElements(to.onDevice, firstChunk), 0u);
}

TEST(StagedTransferTest, OnlyASendOrAReceiveOfItsOwnStagingIsBuilt) {
  auto nvidia = simDevice(device::Vendor::Nvidia, 0);
  TransferLanes lanes;
  Cluster cluster(2);
  std::vector<uint8_t> host(64), other(64);
  uint8_t* onDevice = deviceBytes(*nvidia, 64);
  const StagedTransferPlan plan{nvidia.get(), onDevice, host.data(), 64, 16, &lanes};
  NetOpSpec allreduce = cluster.spec(0, NetOpKind::AllReduce);
  allreduce.count = 16;
  allreduce.buffer = host.data();
  EXPECT_EQ(makeStagedTransfer(allreduce, plan).status().code(), Code::InvalidArgument);
  EXPECT_EQ(
      makeStagedTransfer(transferSpec(cluster, true, 16, other.data(), 4096), plan).status().code(),
      Code::InvalidArgument);
  StagedTransferPlan noChunk = plan;
  noChunk.chunkBytes = 0;
  EXPECT_EQ(makeStagedTransfer(transferSpec(cluster, true, 16, host.data(), 4096), noChunk)
                .status()
                .code(),
            Code::InvalidArgument);
  EXPECT_TRUE(makeStagedTransfer(transferSpec(cluster, true, 16, host.data(), 4096), plan).isOk());
}

}  // namespace
}  // namespace hc::session
