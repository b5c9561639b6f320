// StagedTransfer: sends and receives of device memory staged through host memory beside the wire,
// between nodes of a loopback fabric, on sim devices (real stream workers, simulated copy speed,
// injected faults). What must hold: the bytes arrive whole at every size, including sizes that
// neither the copy chunk nor the wire chunk divides; no wire chunk leaves before its bytes are out
// of the device; a receive is final only once its bytes are in the device; wire chunks leave while
// later copies still run; a copy that fails fails the op with a DeviceError and its peer too.
#include "daemon/staging/staged_transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/device/sim/sim_device.h"
#include "tests/unit/daemon/coll/net/net_test_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"

namespace hc::staging {
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
  spec.dtype = Dtype{kFloat32};
  spec.root = send ? 1 : 0;
  spec.count = count;
  spec.buffer = buffer;
  spec.options.chunkBytes = wireChunk;
  spec.options.maxInFlight = 2;
  return spec;
}

// How a staged end cuts its transfer: copies, wire chunks, and a ring (0: none).
struct Chunking {
  size_t copy;
  size_t wire;
  size_t ring = 0;
};

// The staged end on `d`: device bytes, host staging (filled with kFill, then guard bytes that
// must never change) and the op.
struct StagedEnd {
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kGuardByte = 0xA5;
  uint8_t* onDevice = nullptr;
  std::vector<uint8_t> host;
  NetOpPtr op;
  bool guardIntact() const {
    return std::all_of(host.end() - kGuard, host.end(), [](uint8_t b) { return b == kGuardByte; });
  }
};

StagedEnd stagedEnd(Cluster& cluster, bool send, device::Device& d, TransferLanes& lanes,
                    size_t count, const Chunking& c) {
  StagedEnd end;
  const size_t bytes = count * 4;
  end.onDevice = deviceBytes(d, bytes);
  const size_t minTail = cluster.endpoint(send ? 0 : 1).directMinBytes();
  const size_t hostBytes = c.ring != 0 ? c.ring + minTail : std::max<size_t>(bytes, 1);
  end.host.assign(hostBytes, kFill);
  end.host.resize(hostBytes + StagedEnd::kGuard, StagedEnd::kGuardByte);
  if (!send) std::memset(end.onDevice, kFill, bytes);
  const StagedTransferPlan plan{&d,    end.onDevice, end.host.data(), hostBytes,
                                bytes, c.copy,       c.ring,          &lanes};
  auto op = makeStagedTransfer(transferSpec(cluster, send, count, end.host.data(), c.wire), plan);
  EXPECT_TRUE(op.isOk()) << op.status().toString();
  if (op.isOk()) end.op = std::move(op.value());
  return end;
}

// The lanes of the two ends of a transfer. The ends progress on threads of their own, as two
// daemons would, and a TransferLanes belongs to one progress thread: one each.
struct EndLanes {
  TransferLanes sender;
  TransferLanes receiver;
};

// One device-to-device transfer from `from` to `to`, checked: both ends succeed, the receiving
// device holds the data (#wrong 0), and no staging was written past its end.
void expectTransfer(device::Device& from, device::Device& to, EndLanes& lanes, size_t count,
                    const Chunking& c, size_t minTail = 0) {
  SCOPED_TRACE("count " + std::to_string(count) + ", copies of " + std::to_string(c.copy) +
               ", wire chunks of " + std::to_string(c.wire) + ", ring " + std::to_string(c.ring) +
               ", shortest message " + std::to_string(minTail));
  Cluster cluster(2);
  for (size_t n = 0; n < 2; ++n) {
    cluster.endpoint(n).claimMemory({transport::MemoryKind::Cuda}, minTail);
  }
  const std::vector<uint8_t> data = seeded(count, count + 11);
  StagedEnd sender = stagedEnd(cluster, true, from, lanes.sender, count, c);
  StagedEnd receiver = stagedEnd(cluster, false, to, lanes.receiver, count, c);
  ASSERT_TRUE(sender.op && receiver.op);
  if (!data.empty()) std::memcpy(sender.onDevice, data.data(), data.size());
  std::vector<Outcome> outcomes = cluster.runThreaded({sender.op.get(), receiver.op.get()});
  EXPECT_TRUE(outcomes[0].status.isOk()) << outcomes[0].status.toString();
  EXPECT_TRUE(outcomes[1].status.isOk()) << outcomes[1].status.toString();
  EXPECT_EQ(wrongElements(receiver.onDevice, data), 0u) << "#wrong in the receiving device";
  EXPECT_TRUE(sender.guardIntact() && receiver.guardIntact()) << "staging written past its end";
  EXPECT_STREQ(sender.op->algorithm(), "send_staged");
  EXPECT_STREQ(receiver.op->algorithm(), "recv_staged");
}

TEST(StagedTransferTest, DeviceToDeviceArrivesWholeAtEverySizeAndChunking) {
  // 300 µs per copy: a wire chunk that left before its copy ran would carry kFill bytes, and a
  // receive reported final before its copies ran would leave kFill in the device.
  auto nvidia = simDevice(device::Vendor::Nvidia, 300);
  auto amd = simDevice(device::Vendor::Amd, 300);
  EndLanes lanes;
  for (const Chunking c : {Chunking{4096, 1000}, Chunking{1000, 4096}, Chunking{65536, 65536}}) {
    for (size_t count : {0, 1, 7, 1023, 4097, 100003}) {
      expectTransfer(*nvidia, *amd, lanes, count, c);
    }
  }
}

TEST(StagedTransferTest, ALongTransferGoesThroughARingOfStaging) {
  // 400 KB through 16 KiB of staging on each side (many laps), with 300 µs copies: a lap that
  // overwrote bytes not yet sent, or received into bytes not yet copied into the device, shows
  // as #wrong. Counts whose tails are shorter than the transport's shortest message (300 B)
  // make the wire's last chunk longer than the others, across the end of the ring.
  auto nvidia = simDevice(device::Vendor::Nvidia, 300);
  auto amd = simDevice(device::Vendor::Amd, 300);
  EndLanes lanes;
  const Chunking ring{4096, 1024, 16384};
  for (size_t count : {100003, 102400, 102401, 102450, 4096 * 5 + 10}) {
    expectTransfer(*nvidia, *amd, lanes, count, ring, 300);
    expectTransfer(*amd, *nvidia, lanes, count, ring, 0);
  }
  // Copies of one wire chunk, a ring of two copies.
  expectTransfer(*nvidia, *amd, lanes, 50001, Chunking{2048, 2048, 4096}, 100);
}

TEST(StagedTransferTest, GeometryUsesARingOnlyForTransfersLongerThanFourCopies) {
  const uint64_t wire = 512 << 10, most = 4 << 20;
  // Up to four copies: no ring, staging of the transfer's size, copies of a quarter of it
  // rounded up to whole wire chunks.
  StagingGeometry small = stagingGeometry(9 << 20, wire, most, 100);
  EXPECT_EQ(small.ringBytes, 0u);
  EXPECT_EQ(small.hostBytes, uint64_t{9} << 20);
  EXPECT_EQ(small.chunkBytes, uint64_t{5} * wire);  // 2.25 MiB rounded up to 512 KiB chunks
  StagingGeometry tiny = stagingGeometry(1000, wire, most, 100);
  EXPECT_EQ(tiny.ringBytes, 0u);
  EXPECT_EQ(tiny.chunkBytes, wire);
  EXPECT_EQ(stagingGeometry(0, wire, most, 100).hostBytes, 1u);
  // Longer: a ring of four copies of devices.staging_chunk_bytes, and room for a last chunk.
  StagingGeometry large = stagingGeometry(uint64_t{1} << 30, wire, most, 100);
  EXPECT_EQ(large.chunkBytes, most);
  EXPECT_EQ(large.ringBytes, 4 * most);
  EXPECT_EQ(large.hostBytes, 4 * most + 100);
  // A staging chunk that is no multiple of the wire chunk is rounded up to one.
  EXPECT_EQ(stagingGeometry(uint64_t{1} << 30, wire, 3'000'000, 0).chunkBytes, uint64_t{6} * wire);
  // A transport whose shortest message into device memory exceeds three copies: no ring.
  EXPECT_EQ(stagingGeometry(uint64_t{1} << 20, 4096, 4096, 20000).ringBytes, 0u);
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
  StagedEnd from = stagedEnd(cluster, true, *nvidia, lanes, count, Chunking{4096, 4096});
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
    StagedEnd to = stagedEnd(cluster, false, *amd, lanes, count, Chunking{4096, 4096});
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
  StagedEnd to = stagedEnd(cluster, false, *amd, lanes, count, Chunking{4096, 1000});
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
  const StagedTransferPlan plan{nvidia.get(), onDevice, host.data(), 64, 64, 16, 0, &lanes};
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
  StagedTransferPlan shortStaging = plan;
  shortStaging.hostBytes = 63;
  EXPECT_EQ(makeStagedTransfer(transferSpec(cluster, true, 16, host.data(), 4096), shortStaging)
                .status()
                .code(),
            Code::InvalidArgument);
  StagedTransferPlan ringOfShortCopies = plan;  // copies of 16 B cannot hold 4096 B wire chunks
  ringOfShortCopies.ringBytes = 32;
  EXPECT_EQ(
      makeStagedTransfer(transferSpec(cluster, true, 16, host.data(), 4096), ringOfShortCopies)
          .status()
          .code(),
      Code::InvalidArgument);
  EXPECT_TRUE(makeStagedTransfer(transferSpec(cluster, true, 16, host.data(), 4096), plan).isOk());
}

}  // namespace
}  // namespace hc::staging
