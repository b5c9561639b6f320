// The device-direct probe: a device goes direct only when the transport moves its memory kind,
// the bytes survive a round trip in place, and that round trip beats staging. Fakes stand in for
// what this machine lacks: a device whose memory a transport addresses as CUDA memory (a sim
// device behind another label), a transport that reads other bytes than the device wrote, and a
// transport slow on device memory. The last test probes through a real UCX endpoint to itself,
// as the daemon does at startup.
#include "daemon/staging/direct_probe.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/device/host/host_device.h"
#include "daemon/device/sim/sim_device.h"
#include "daemon/transport/loopback/loopback_transport.h"
#include "daemon/transport/ucx/ucx_transport.h"

namespace hc::staging {
namespace {

using device::Device;
using device::MemoryType;
using transport::MemoryKind;

std::unique_ptr<device::SimDevice> simDevice(double copyGBps, bool exposed) {
  simdev::StreamTiming timing;
  timing.copyGBps = copyGBps;
  auto d = std::make_unique<device::SimDevice>(device::Vendor::Nvidia, 0, timing,
                                               device::SimFaults{}, nullptr);
  if (exposed) d->exposeToTransport();
  return d;
}

// A sim device that says a transport would address its memory as `type` (CUDA memory, say).
// With `decoy`, allocDevice() hands out a pointer to other bytes than its copies reach: a
// transport that claims the memory type but does not really read the device.
class RelabelledDevice final : public Device {
 public:
  RelabelledDevice(std::unique_ptr<device::SimDevice> inner, MemoryType type, bool decoy)
      : inner_(std::move(inner)), caps_(inner_->capabilities()), decoy_(decoy) {
    caps_.transportMemory = {type};
  }
  const device::DeviceInfo& info() const override { return inner_->info(); }
  const device::Capabilities& capabilities() const override { return caps_; }
  Result<device::ImportedBuffer> importBuffer(const device::BufferHandle& h) override {
    return inner_->importBuffer(h);
  }
  Status releaseBuffer(device::ImportedBuffer& b) override { return inner_->releaseBuffer(b); }
  Result<void*> allocPinned(size_t bytes) override { return inner_->allocPinned(bytes); }
  Status freePinned(void* p) override { return inner_->freePinned(p); }
  Result<void*> allocDevice(size_t bytes) override {
    auto real = inner_->allocDevice(bytes);
    if (!real.isOk() || !decoy_) return real;
    decoyBytes_.assign(bytes, 0);
    real_ = *real;
    return static_cast<void*>(decoyBytes_.data());
  }
  Status freeDevice(void* p) override { return inner_->freeDevice(translate(p)); }
  Result<device::StreamId> createStream() override { return inner_->createStream(); }
  Status destroyStream(device::StreamId s) override { return inner_->destroyStream(s); }
  Status copyAsync(device::StreamId s, void* dst, const void* src, size_t bytes) override {
    return inner_->copyAsync(s, translate(dst), translate(const_cast<void*>(src)), bytes);
  }
  Status reduceAsync(device::StreamId s, const device::ReduceWork& w) override {
    return inner_->reduceAsync(s, w);
  }
  Result<device::EventId> recordEvent(device::StreamId s) override {
    return inner_->recordEvent(s);
  }
  Result<bool> queryEvent(device::EventId e) override { return inner_->queryEvent(e); }
  Status releaseEvent(device::EventId e) override { return inner_->releaseEvent(e); }
  Status synchronize(device::StreamId s) override { return inner_->synchronize(s); }

 private:
  void* translate(void* p) const {
    auto* b = static_cast<uint8_t*>(p);
    if (!decoy_ || b < decoyBytes_.data() || b >= decoyBytes_.data() + decoyBytes_.size()) {
      return p;
    }
    return static_cast<uint8_t*>(real_) + (b - decoyBytes_.data());
  }

  std::unique_ptr<device::SimDevice> inner_;
  device::Capabilities caps_;
  const bool decoy_;
  std::vector<uint8_t> decoyBytes_;
  void* real_ = nullptr;
};

// A loopback endpoint whose sends of device memory take 20 ms each: device memory it moves, but
// slowly (a transport that stages internally through a slow path).
class SlowOnDeviceMemory final : public transport::Transport {
 public:
  explicit SlowOnDeviceMemory(transport::LoopbackTransport& inner) : inner_(inner) {}
  std::string_view name() const override { return "slow"; }
  transport::PeerAddress address() const override { return inner_.address(); }
  Result<transport::PeerId> connect(const transport::PeerAddress& a) override {
    return inner_.connect(a);
  }
  Status disconnect(transport::PeerId p) override { return inner_.disconnect(p); }
  bool movesMemory(MemoryKind kind) const override { return inner_.movesMemory(kind); }
  size_t directMinBytes() const override { return inner_.directMinBytes(); }
  using Transport::postRecv;
  using Transport::postSend;
  Result<transport::RequestId> postSend(transport::PeerId p, transport::Tag tag, const void* buf,
                                        size_t bytes, MemoryKind kind) override {
    if (kind != MemoryKind::Host) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return inner_.postSend(p, tag, buf, bytes, kind);
  }
  Result<transport::RequestId> postRecv(transport::PeerId p, transport::Tag tag, void* buf,
                                        size_t bytes, MemoryKind kind) override {
    if (kind != MemoryKind::Host) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return inner_.postRecv(p, tag, buf, bytes, kind);
  }
  using Transport::test;
  Result<bool> test(transport::RequestId r, size_t* bytes) override {
    return inner_.test(r, bytes);
  }
  size_t progress() override { return inner_.progress(); }
  Status cancel(transport::RequestId r) override { return inner_.cancel(r); }
  size_t dropUnexpected(
      const std::function<bool(const transport::UnexpectedMessage&)>& drop) override {
    return inner_.dropUnexpected(drop);
  }
  int eventFd() const override { return inner_.eventFd(); }
  void setPeerFailureHandler(PeerFailureHandler h) override {
    inner_.setPeerFailureHandler(std::move(h));
  }

 private:
  transport::LoopbackTransport& inner_;
};

class DirectProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto endpoint = fabric_.attach();
    ASSERT_TRUE(endpoint.isOk()) << endpoint.status().toString();
    endpoint_ = std::move(endpoint.value());
  }

  transport::LoopbackFabric fabric_;
  std::unique_ptr<transport::LoopbackTransport> endpoint_;
  DirectProbeOptions options_{
      .bytes = 256 << 10, .rounds = 3, .timeout = std::chrono::milliseconds(2000)};
};

TEST_F(DirectProbeTest, ASimDeviceExposedToTheTransportGoesDirectWhenStagingCostsCopies) {
  // 1 GB/s copies: staging 256 KiB costs about 0.26 ms each way, against two memcpys in place.
  auto sim = simDevice(1.0, true);
  DirectVerdict v = probeDirect(*endpoint_, *sim, options_);
  EXPECT_TRUE(v.direct) << v.why;
  EXPECT_EQ(v.kind, MemoryKind::Host);
  EXPECT_GT(v.stagedMs, v.directMs) << v.why;
  EXPECT_NE(v.why.find("zero copy"), std::string::npos) << v.why;
}

TEST_F(DirectProbeTest, ASimDeviceLeftAsAGpuWithoutGpuDirectStages) {
  auto sim = simDevice(1.0, false);
  DirectVerdict v = probeDirect(*endpoint_, *sim, options_);
  EXPECT_FALSE(v.direct);
  EXPECT_NE(v.why.find("only through host copies"), std::string::npos) << v.why;
  EXPECT_EQ(v.directMs, 0) << "nothing was timed";
}

TEST_F(DirectProbeTest, ATransportWithoutTheDevicesMemoryTypeStagesAndOneWithItGoesDirect) {
  RelabelledDevice gpu(simDevice(1.0, false), MemoryType::Cuda, false);
  DirectVerdict refused = probeDirect(*endpoint_, gpu, options_);
  EXPECT_FALSE(refused.direct);
  EXPECT_NE(refused.why.find("moves no cuda memory"), std::string::npos) << refused.why;

  endpoint_->claimMemory({MemoryKind::Cuda});
  DirectVerdict taken = probeDirect(*endpoint_, gpu, options_);
  EXPECT_TRUE(taken.direct) << taken.why;
  EXPECT_EQ(taken.kind, MemoryKind::Cuda);
}

TEST_F(DirectProbeTest, BytesThatArriveChangedFailTheProbe) {
  endpoint_->claimMemory({MemoryKind::Cuda});
  RelabelledDevice gpu(simDevice(1.0, false), MemoryType::Cuda, true);
  DirectVerdict v = probeDirect(*endpoint_, gpu, options_);
  EXPECT_FALSE(v.direct);
  EXPECT_NE(v.why.find("arrived changed"), std::string::npos) << v.why;
}

TEST_F(DirectProbeTest, InPlaceSlowerThanStagingIsNotChosen) {
  endpoint_->claimMemory({MemoryKind::Cuda});
  SlowOnDeviceMemory slow(*endpoint_);
  // Unlimited copies: staging costs two memcpys more, in place 40 ms of waiting more.
  RelabelledDevice gpu(simDevice(0, false), MemoryType::Cuda, false);
  DirectVerdict v = probeDirect(slow, gpu, options_);
  EXPECT_FALSE(v.direct) << v.why;
  EXPECT_GT(v.directMs, v.stagedMs) << v.why;
  EXPECT_NE(v.why.find("slower than staging"), std::string::npos) << v.why;
}

TEST_F(DirectProbeTest, EveryDeviceButTheHostIsProbedAndOnlyThosePassingAreLent) {
  device::DeviceRegistry registry;
  ASSERT_TRUE(registry.add(std::make_unique<device::HostDevice>(nullptr)).isOk());
  auto exposed = simDevice(1.0, true);
  const Device* exposedPtr = exposed.get();
  ASSERT_TRUE(registry.add(std::move(exposed)).isOk());
  auto other = std::make_unique<device::SimDevice>(device::Vendor::Amd, 0, simdev::StreamTiming{},
                                                   device::SimFaults{}, nullptr);
  const Device* otherPtr = other.get();
  ASSERT_TRUE(registry.add(std::move(other)).isOk());

  std::vector<DirectVerdict> verdicts;
  DirectDevices direct = probeDirectDevices(*endpoint_, registry, options_, &verdicts);
  ASSERT_EQ(verdicts.size(), 2u) << "the host device has nothing to stage";
  EXPECT_EQ(direct.kindOf(exposedPtr), MemoryKind::Host);
  EXPECT_FALSE(direct.kindOf(otherPtr).has_value());
  EXPECT_EQ(direct.minBytes, endpoint_->directMinBytes());
}

TEST(DirectProbeUcxTest, AnExposedSimDeviceGoesDirectThroughUcxToItself) {
  transport::UcxOptions uo;
  uo.transports = "tcp,self";
  auto ucx = transport::createUcxTransport(uo);
  ASSERT_TRUE(ucx.isOk()) << ucx.status().toString();
  EXPECT_TRUE((*ucx)->movesMemory(MemoryKind::Host));
  auto sim = simDevice(1.0, true);
  DirectVerdict v = probeDirect(**ucx, *sim, DirectProbeOptions{});
  EXPECT_TRUE(v.direct) << v.why;
  // And a CUDA-labelled device is refused up front by this UCX unless it was built with CUDA.
  RelabelledDevice gpu(simDevice(1.0, false), MemoryType::Cuda, false);
  DirectVerdict g = probeDirect(**ucx, gpu, DirectProbeOptions{});
  if (!(*ucx)->movesMemory(MemoryKind::Cuda)) {
    EXPECT_FALSE(g.direct);
    EXPECT_NE(g.why.find("moves no cuda memory"), std::string::npos) << g.why;
  }
}

}  // namespace
}  // namespace hc::staging
