// Device memory in a session, against a real Session (socketpair + Hello) and real simulated
// devices: MemRegister checks (vendor, device, backend, fd, size), the device named by PCI
// address, regions bound to the client, buffer references bounded by their region, and the
// staging copies through DeviceCopier.
#include "daemon/session/device_regions.h"

#include <sys/socket.h>

#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"
#include "common/simdev/sim_allocation.h"
#include "daemon/device/sim/sim_node.h"
#include "daemon/session/client_staging.h"
#include "daemon/session/validate.h"

namespace hc::session {
namespace {

constexpr uint64_t kBytes = 1 << 16;

class DeviceRegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device::SimNodeOptions sim;
    sim.nvidia = 2;
    sim.amd = 1;
    ASSERT_TRUE(device::addSimDevices(registry_, sim, nullptr).isOk());
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    peer_.reset(sv[1]);
    session_ = std::make_shared<Session>(1, UniqueFd(sv[0]), PeerIdentity{});
    session_->setDevices(&registry_);
    auto hello = ipc::makeFrame<ipc::HelloFrame>(ipc::FrameType::Hello, 1);
    ASSERT_TRUE(session_->handleFrame(ipc::frameBytes(hello), {}, 8 << 20, 64 << 20, 16).isOk());
    ASSERT_TRUE(receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true).isOk());
    auto a = simdev::SimAllocation::create(kBytes, "test");
    ASSERT_TRUE(a.isOk());
    memory_ = std::move(a.value());
  }

  ipc::MemRegisterFrame frame(uint8_t vendor = 1, int device = 0, uint64_t bytes = kBytes) {
    auto f = ipc::makeFrame<ipc::MemRegisterFrame>(ipc::FrameType::MemRegister, 9);
    f.memoryType = static_cast<uint8_t>(ipc::DeviceMemory::Sim);
    f.vendor = vendor;
    f.device = device;
    f.allocationId = 42;
    f.bytes = bytes;
    f.handleKind = static_cast<uint32_t>(ipc::HandleKind::Fd);
    return f;
  }

  // The frame naming its device by PCI address as well.
  ipc::MemRegisterFrame framePci(uint8_t vendor, int device, uint32_t pciAddress) {
    auto f = frame(vendor, device);
    f.flags = ipc::kMemRegisterPciAddress;
    f.pciAddress = pciAddress;
    return f;
  }

  // The index of the device a region was mapped on.
  int regionDevice(uint32_t region) {
    DeviceRegionPtr r = session_->deviceRegion(region);
    return r == nullptr ? -1 : r->device()->info().index;
  }

  // Sends a MemRegister through the session; the region id, or 0 with *error (and *code) set.
  uint32_t registerFrame(const ipc::MemRegisterFrame& f, bool withFd, std::string* error,
                         Code* code = nullptr) {
    std::vector<UniqueFd> fds;
    if (withFd) fds.emplace_back(::dup(memory_.fd()));
    EXPECT_TRUE(session_->handleFrame(ipc::frameBytes(f), fds, 0, 0, 0).isOk());
    auto reply = receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true);
    EXPECT_TRUE(reply.isOk());
    auto header = ipc::frameAs<ipc::FrameHeader>(reply->bytes);
    if (header.type == static_cast<uint16_t>(ipc::FrameType::Error)) {
      const auto e = ipc::frameAs<ipc::ErrorFrame>(reply->bytes);
      *error = e.message;
      if (code != nullptr) *code = static_cast<Code>(e.status);
      return 0;
    }
    return ipc::frameAs<ipc::MemRegisterReplyFrame>(reply->bytes).region;
  }

  ipc::SubmitEntry allreduce(uint32_t region, uint64_t sendOffset, uint64_t recvOffset,
                             uint64_t count) {
    ipc::SubmitEntry e{};
    e.op = static_cast<uint8_t>(ipc::OpType::AllReduce);
    e.dtype = 7;  // float32
    e.count = count;
    e.send = {sendOffset, static_cast<uint8_t>(ipc::MemKind::Device), {}, region};
    e.recv = {recvOffset, static_cast<uint8_t>(ipc::MemKind::Device), {}, region};
    return e;
  }

  device::DeviceRegistry registry_;
  UniqueFd peer_;
  SessionPtr session_;
  simdev::SimAllocation memory_;
};

TEST_F(DeviceRegionsTest, RegistersASealedMemfdAndRefusesBadFrames) {
  std::string error;
  const uint32_t region = registerFrame(frame(), true, &error);
  ASSERT_NE(region, 0u) << error;
  ASSERT_NE(session_->deviceRegion(region), nullptr);
  EXPECT_EQ(session_->deviceRegion(region)->bytes(), kBytes);
  // The daemon's mapping shows what the client wrote: the same memory, not a copy.
  memory_.data()[100] = 0x5a;
  EXPECT_EQ(session_->deviceRegion(region)->data()[100], 0x5a);

  struct Bad {
    ipc::MemRegisterFrame f;
    bool withFd;
    const char* words;
  };
  const Bad bad[] = {
      {frame(1, 3), true, "no device nvidia:3"},
      {frame(7, 0), true, "unknown device vendor 7"},
      {frame(1, 0, kBytes * 2), true, ""},  // larger than the memfd: the import refuses it
      {frame(1, 0, 0), true, "0 bytes"},
  };
  for (const Bad& b : bad) {
    error.clear();
    EXPECT_EQ(registerFrame(b.f, b.withFd, &error), 0u) << b.words;
    EXPECT_NE(error.find(b.words), std::string::npos) << error;
  }
  auto legacy = frame();
  legacy.handleKind = static_cast<uint32_t>(ipc::HandleKind::LegacyIpc);
  error.clear();
  EXPECT_EQ(registerFrame(legacy, false, &error), 0u);  // a sim device takes fds only
  EXPECT_FALSE(error.empty());
}

// devices.legacy_ipc = false: a legacy handle, which names memory without holding it, is refused
// before any device opens it; memory handed over as an fd is still taken.
TEST_F(DeviceRegionsTest, LegacyIpcHandlesAreRefusedWhenTheDaemonSaysSo) {
  auto legacy = frame();
  legacy.handleKind = static_cast<uint32_t>(ipc::HandleKind::LegacyIpc);
  std::string error;
  Code code = Code::Ok;
  EXPECT_EQ(registerFrame(legacy, false, &error, &code), 0u);
  EXPECT_NE(code, Code::PermissionDenied) << "taken by default: the device answers";

  session_->allowLegacyIpc(false);
  error.clear();
  EXPECT_EQ(registerFrame(legacy, false, &error, &code), 0u);
  EXPECT_EQ(code, Code::PermissionDenied) << error;
  EXPECT_NE(error.find("devices.legacy_ipc = false"), std::string::npos) << error;
  EXPECT_NE(error.find("POSIX fd"), std::string::npos) << error;
  const uint32_t region = registerFrame(frame(), true, &error);
  EXPECT_NE(region, 0u) << error;
}

// devices.max_imported_bytes_per_client: an import past the client's cap is NoResource naming
// the key, and unregistering makes room again. /metrics counts each import and release, and the
// bytes mapped, which fall only once the last op using an unregistered region let go of it.
TEST_F(DeviceRegionsTest, ImportsPastTheByteCapAreRefusedAndCounted) {
  metrics::DaemonMetrics metrics(metrics::BuildInfo{});
  session_->countDeviceImports(&metrics);
  session_->limitDeviceBytes(kBytes + kBytes / 2);
  auto sample = [&](const std::string& name) {
    const std::string text = metrics.render();
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  std::string error;
  const uint32_t first = registerFrame(frame(), true, &error);
  ASSERT_NE(first, 0u) << error;
  EXPECT_EQ(sample("hetero_comm_device_imports_total"), 1);
  EXPECT_EQ(sample("hetero_comm_device_imported_bytes"), static_cast<double>(kBytes));
  Code code = Code::Ok;
  EXPECT_EQ(registerFrame(frame(), true, &error, &code), 0u);
  EXPECT_EQ(code, Code::NoResource) << error;
  EXPECT_NE(error.find("devices.max_imported_bytes_per_client"), std::string::npos) << error;
  EXPECT_EQ(sample("hetero_comm_device_imports_total"), 1);

  auto unregister = [&](uint32_t region) {
    auto f = ipc::makeFrame<ipc::MemUnregisterFrame>(ipc::FrameType::MemUnregister, 5);
    f.region = region;
    ASSERT_TRUE(session_->handleFrame(ipc::frameBytes(f), {}, 0, 0, 0).isOk());
    ASSERT_TRUE(receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true).isOk());
  };
  DeviceRegionPtr inUse = session_->deviceRegion(first);  // as an op in flight holds it
  unregister(first);
  EXPECT_EQ(sample("hetero_comm_device_releases_total"), 0) << "still used by the op";
  const uint32_t second = registerFrame(frame(), true, &error);
  EXPECT_NE(second, 0u) << "the cap counts registered regions: " << error;
  inUse.reset();
  EXPECT_EQ(sample("hetero_comm_device_releases_total"), 1);
  EXPECT_EQ(sample("hetero_comm_device_imported_bytes"), static_cast<double>(kBytes));
  unregister(second);  // before the metrics it reports to go
  EXPECT_EQ(sample("hetero_comm_device_imported_bytes"), 0);
}

// A handle descriptor that no driver exports (a pipe, a socket) is refused before any device sees
// it: a driver reading a pipe nobody writes to would block the IPC thread.
TEST_F(DeviceRegionsTest, HandleDescriptorsThatNoDriverExportsAreRefused) {
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  UniqueFd readEnd(pipeFds[0]), writeEnd(pipeFds[1]);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd s0(pair[0]), s1(pair[1]);
  for (const auto& [fd, words] : {std::pair{readEnd.get(), "a pipe"}, {s0.get(), "a socket"}}) {
    std::vector<UniqueFd> fds;
    fds.emplace_back(::dup(fd));
    ASSERT_TRUE(session_->handleFrame(ipc::frameBytes(frame()), fds, 0, 0, 0).isOk());
    auto reply = receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true);
    ASSERT_TRUE(reply.isOk());
    auto header = ipc::frameAs<ipc::FrameHeader>(reply->bytes);
    ASSERT_EQ(header.type, static_cast<uint16_t>(ipc::FrameType::Error)) << words;
    const std::string text = ipc::frameAs<ipc::ErrorFrame>(reply->bytes).message;
    EXPECT_NE(text.find(words), std::string::npos) << text;
  }
}

// Sim devices carry synthetic PCI addresses: domain ff00 + vendor (nvidia 1, amd 2), bus = index.
constexpr uint32_t kSimNvidia0 = 0xff010000;  // ff01:00:00.0
constexpr uint32_t kSimNvidia1 = 0xff010100;  // ff01:01:00.0

TEST_F(DeviceRegionsTest, PciAddressNamesTheDevice) {
  std::string error;
  const uint32_t region = registerFrame(framePci(1, 1, kSimNvidia1), true, &error);
  ASSERT_NE(region, 0u) << error;
  EXPECT_EQ(regionDevice(region), 1);
  const uint32_t first = registerFrame(framePci(1, 0, kSimNvidia0), true, &error);
  ASSERT_NE(first, 0u) << error;
  EXPECT_EQ(regionDevice(first), 0);
}

// The client's *_VISIBLE_DEVICES renumbered its GPUs: its ordinal 0 is the daemon's nvidia:1.
TEST_F(DeviceRegionsTest, PciAddressWinsOverADisagreeingOrdinal) {
  std::string error;
  const uint32_t region = registerFrame(framePci(1, 0, kSimNvidia1), true, &error);
  ASSERT_NE(region, 0u) << error;
  EXPECT_EQ(regionDevice(region), 1);
  // Even an ordinal this node does not have: the address decides.
  const uint32_t far = registerFrame(framePci(1, 7, kSimNvidia0), true, &error);
  ASSERT_NE(far, 0u) << error;
  EXPECT_EQ(regionDevice(far), 0);
}

TEST_F(DeviceRegionsTest, UnknownPciAddressIsRefusedNamingItAndTheDevicesThere) {
  std::string error;
  Code code = Code::Ok;
  EXPECT_EQ(registerFrame(framePci(1, 0, 0x00003b00), true, &error, &code), 0u);
  EXPECT_EQ(code, Code::InvalidArgument);
  EXPECT_NE(error.find("0000:3b:00.0"), std::string::npos) << error;
  EXPECT_NE(error.find("nvidia:0 at ff01:00:00.0"), std::string::npos) << error;
  EXPECT_NE(error.find("nvidia:1 at ff01:01:00.0"), std::string::npos) << error;
  // The address of an nvidia device does not name an amd one: vendors are looked up apart.
  error.clear();
  EXPECT_EQ(registerFrame(framePci(2, 0, kSimNvidia0), true, &error, &code), 0u);
  EXPECT_EQ(code, Code::InvalidArgument);
  EXPECT_NE(error.find("amd:0 at ff02:00:00.0"), std::string::npos) << error;
}

// Clients before the flag send zeros there; any address without the flag is not read.
TEST_F(DeviceRegionsTest, WithoutTheFlagTheOrdinalDecides) {
  std::string error;
  auto f = frame(1, 1);
  f.pciAddress = kSimNvidia0;  // ignored: the flag is clear
  const uint32_t region = registerFrame(f, true, &error);
  ASSERT_NE(region, 0u) << error;
  EXPECT_EQ(regionDevice(region), 1);
  Code code = Code::Ok;
  EXPECT_EQ(registerFrame(frame(1, 5), true, &error, &code), 0u);
  EXPECT_EQ(code, Code::NotFound);
  EXPECT_NE(error.find("no device nvidia:5"), std::string::npos) << error;
}

TEST_F(DeviceRegionsTest, ReferencesAreBoundedByTheirRegionAndNeedARegionOfThisClient) {
  std::string error;
  const uint32_t region = registerFrame(frame(), true, &error);
  ASSERT_NE(region, 0u) << error;
  const uint64_t n = kBytes / 8;  // two halves of the region
  EXPECT_TRUE(resolveOp(allreduce(region, 0, kBytes / 2, n), session_, 0, 2).isOk());
  auto over = resolveOp(allreduce(region, 0, kBytes / 2 + 4, n), session_, 0, 2);
  ASSERT_FALSE(over.isOk());
  EXPECT_NE(over.status().message().find("overruns"), std::string::npos) << over.status().message();
  auto wraps = resolveOp(allreduce(region, ~0ull - 3, 0, n), session_, 0, 2);
  EXPECT_FALSE(wraps.isOk());
  auto unknown = resolveOp(allreduce(region + 1, 0, kBytes / 2, n), session_, 0, 2);
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("has not registered"), std::string::npos);
  // Partial overlap inside one region is refused as for segment memory.
  auto partial = resolveOp(allreduce(region, 0, 8, n), session_, 0, 2);
  EXPECT_FALSE(partial.isOk());
}

TEST_F(DeviceRegionsTest, UnregisterKeepsTheMappingWhileAnOpHoldsIt) {
  std::string error;
  const uint32_t region = registerFrame(frame(), true, &error);
  ASSERT_NE(region, 0u) << error;
  auto op = resolveOp(allreduce(region, 0, kBytes / 2, 16), session_, 0, 2);
  ASSERT_TRUE(op.isOk());
  auto f = ipc::makeFrame<ipc::MemUnregisterFrame>(ipc::FrameType::MemUnregister, 3);
  f.region = region;
  ASSERT_TRUE(session_->handleFrame(ipc::frameBytes(f), {}, 0, 0, 0).isOk());
  ASSERT_TRUE(receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true).isOk());
  EXPECT_EQ(session_->deviceRegion(region), nullptr);
  ASSERT_NE(op->sendRegion, nullptr);
  memory_.data()[8] = 7;
  EXPECT_EQ(op->sendRegion->data()[8], 7);  // still mapped for the op
  ASSERT_TRUE(session_->handleFrame(ipc::frameBytes(f), {}, 0, 0, 0).isOk());
  auto again = receiveMessage(peer_.get(), ipc::kMaxFrameBytes, true);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(ipc::frameAs<ipc::FrameHeader>(again->bytes).type,
            static_cast<uint16_t>(ipc::FrameType::Error));
}

TEST_F(DeviceRegionsTest, StagingCopiesInAndOutInChunksThatDoNotDivideTheBuffer) {
  std::string error;
  const uint32_t region = registerFrame(frame(), true, &error);
  ASSERT_NE(region, 0u) << error;
  const uint64_t n = kBytes / 8;
  auto* floats = reinterpret_cast<float*>(memory_.data());
  for (uint64_t i = 0; i < n; ++i) floats[i] = static_cast<float>(i);
  auto op = resolveOp(allreduce(region, 0, kBytes / 2, n), session_, 0, 1);
  ASSERT_TRUE(op.isOk());
  std::vector<PendingOp> ops{*op};
  std::vector<coll::RankBuffers> bufs(1);
  staging::StagingPool pool;
  staging::DeviceCopier copier(1000);  // 32 KiB in 33 chunks, the last one short
  StagedMatch staged;
  ASSERT_TRUE(staged.stageIn(ops, bufs, &pool, &copier).isOk());
  const auto* in = reinterpret_cast<const float*>(bufs[0].send);
  uint64_t wrongIn = 0;
  for (uint64_t i = 0; i < n; ++i) wrongIn += in[i] != static_cast<float>(i);
  EXPECT_EQ(wrongIn, 0u);
  auto* out = reinterpret_cast<float*>(bufs[0].recv);
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(2 * i + 1);
  ASSERT_TRUE(staged.stageOut(ops).isOk());
  uint64_t wrongOut = 0;
  for (uint64_t i = 0; i < n; ++i) wrongOut += floats[n + i] != static_cast<float>(2 * i + 1);
  EXPECT_EQ(wrongOut, 0u);
  for (uint64_t i = 0; i < n; ++i) wrongIn += floats[i] != static_cast<float>(i);
  EXPECT_EQ(wrongIn, 0u);  // the send half is untouched
}

}  // namespace
}  // namespace hc::session
