// Sim devices side by side in one process, as GPUs under unified addressing: device memory of
// one's own (allocDevice), copies that reach a peer of the same vendor but not another vendor's,
// and kernels that touch their own device's memory only.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "daemon/device/sim/sim_address_space.h"
#include "daemon/device/sim/sim_device.h"
#include "tests/unit/daemon/device/sim/sim_test_util.h"

namespace hc::device {
namespace {

using testing::kInt32;
using testing::kSum;
using testing::TestKernel;

constexpr size_t kCount = 1000;
constexpr size_t kBytes = kCount * sizeof(int32_t);

class SimPeerTest : public ::testing::Test {
 protected:
  // A stream on `device`, destroyed with the fixture.
  StreamId streamOn(SimDevice& device) {
    Result<StreamId> s = device.createStream();
    EXPECT_TRUE(s.isOk()) << s.status().toString();
    streams_.push_back({&device, s.isOk() ? *s : 0});
    return s.isOk() ? *s : 0;
  }
  void* allocOn(SimDevice& device) {
    Result<void*> p = device.allocDevice(kBytes);
    EXPECT_TRUE(p.isOk()) << p.status().toString();
    return p.isOk() ? *p : nullptr;
  }
  void TearDown() override {
    for (auto [device, stream] : streams_) EXPECT_TRUE(device->destroyStream(stream).isOk());
  }

  std::atomic<size_t> elements_{0};
  SimDevice nvidia0_{Vendor::Nvidia, 0, {}, {}, TestKernel{&elements_}};
  SimDevice nvidia1_{Vendor::Nvidia, 1, {}, {}, TestKernel{&elements_}};
  SimDevice amd0_{Vendor::Amd, 0, {}, {}, TestKernel{&elements_}};
  std::vector<std::pair<SimDevice*, StreamId>> streams_;
};

TEST_F(SimPeerTest, DeviceMemoryRoundTripsAndIsFreedOnce) {
  EXPECT_TRUE(nvidia0_.capabilities().peerCopy);
  EXPECT_EQ(nvidia0_.allocDevice(0).status().code(), Code::InvalidArgument);
  void* memory = allocOn(nvidia0_);
  ASSERT_NE(memory, nullptr);
  std::vector<int32_t> in(kCount), out(kCount, -1);
  std::iota(in.begin(), in.end(), 7);
  const StreamId stream = streamOn(nvidia0_);
  ASSERT_TRUE(nvidia0_.copyAsync(stream, memory, in.data(), kBytes).isOk());
  ASSERT_TRUE(nvidia0_.copyAsync(stream, out.data(), memory, kBytes).isOk());
  ASSERT_TRUE(nvidia0_.synchronize(stream).isOk());
  EXPECT_EQ(out, in);
  // A copy running past the allocation's end (kBytes, rounded up to a page) is an illegal
  // address.
  EXPECT_EQ(
      nvidia0_.copyAsync(stream, out.data(), static_cast<uint8_t*>(memory) + kBytes, kBytes).code(),
      Code::InvalidArgument);
  EXPECT_TRUE(nvidia0_.freeDevice(memory).isOk());
  EXPECT_EQ(nvidia0_.freeDevice(memory).code(), Code::NotFound);
  EXPECT_EQ(nvidia1_.freeDevice(in.data()).code(), Code::NotFound);
}

TEST_F(SimPeerTest, CopiesReachAPeerOfTheSameVendorButNotAnotherVendorsDevice) {
  void* onNvidia1 = allocOn(nvidia1_);
  void* onNvidia0 = allocOn(nvidia0_);
  ASSERT_TRUE(onNvidia1 != nullptr && onNvidia0 != nullptr);
  std::vector<int32_t> in(kCount), out(kCount, -1);
  std::iota(in.begin(), in.end(), -3);
  const StreamId s1 = streamOn(nvidia1_);
  ASSERT_TRUE(nvidia1_.copyAsync(s1, onNvidia1, in.data(), kBytes).isOk());
  ASSERT_TRUE(nvidia1_.synchronize(s1).isOk());

  // nvidia:0 pulls from its peer's memory, then hands the bytes back to the host.
  const StreamId s0 = streamOn(nvidia0_);
  ASSERT_TRUE(nvidia0_.copyAsync(s0, onNvidia0, onNvidia1, kBytes).isOk());
  ASSERT_TRUE(nvidia0_.copyAsync(s0, out.data(), onNvidia0, kBytes).isOk());
  ASSERT_TRUE(nvidia0_.synchronize(s0).isOk());
  EXPECT_EQ(out, in);

  const StreamId sa = streamOn(amd0_);
  Status from = amd0_.copyAsync(sa, out.data(), onNvidia1, kBytes);
  EXPECT_EQ(from.code(), Code::InvalidArgument);
  EXPECT_NE(from.message().find("sim nvidia:1"), std::string::npos) << from.message();
  EXPECT_EQ(amd0_.copyAsync(sa, onNvidia0, in.data(), kBytes).code(), Code::InvalidArgument);
  EXPECT_TRUE(nvidia1_.freeDevice(onNvidia1).isOk());
  EXPECT_TRUE(nvidia0_.freeDevice(onNvidia0).isOk());
}

TEST_F(SimPeerTest, KernelsTouchTheirOwnDevicesMemoryOnly) {
  void* mine = allocOn(nvidia0_);
  void* peers = allocOn(nvidia1_);
  ASSERT_TRUE(mine != nullptr && peers != nullptr);
  std::vector<int32_t> host(kCount, 2), out(kCount, 0);
  const StreamId stream = streamOn(nvidia0_);
  ASSERT_TRUE(nvidia0_.copyAsync(stream, mine, host.data(), kBytes).isOk());

  const void* fromPeer[] = {mine, peers};
  void* intoMine[] = {mine};
  Status read =
      nvidia0_.reduceAsync(stream, ReduceWork{kInt32, kSum, fromPeer, intoMine, {}, 2, kCount});
  EXPECT_EQ(read.code(), Code::InvalidArgument);
  EXPECT_NE(read.message().find("sim nvidia:1"), std::string::npos) << read.message();
  const void* own[] = {mine, mine};
  void* intoPeer[] = {peers};
  EXPECT_EQ(
      nvidia0_.reduceAsync(stream, ReduceWork{kInt32, kSum, own, intoPeer, {}, 2, kCount}).code(),
      Code::InvalidArgument);

  // Its own memory, and host memory (which belongs to no device), are fine.
  const void* allowed[] = {mine, host.data()};
  void* into[] = {out.data()};
  ASSERT_TRUE(
      nvidia0_.reduceAsync(stream, ReduceWork{kInt32, kSum, allowed, into, {}, 2, kCount}).isOk());
  ASSERT_TRUE(nvidia0_.synchronize(stream).isOk());
  EXPECT_EQ(out, std::vector<int32_t>(kCount, 4));
  EXPECT_TRUE(nvidia0_.freeDevice(mine).isOk());
  EXPECT_TRUE(nvidia1_.freeDevice(peers).isOk());
}

TEST_F(SimPeerTest, ADestroyedDeviceNoLongerOwnsItsMemory) {
  void* memory = nullptr;
  {
    SimDevice doomed{Vendor::Amd, 5, {}, {}, TestKernel{&elements_}};
    Result<void*> p = doomed.allocDevice(kBytes);
    ASSERT_TRUE(p.isOk());
    memory = *p;
    std::optional<SimOwner> owner = SimAddressSpace::instance().ownerOf(memory);
    ASSERT_TRUE(owner.has_value());
    EXPECT_EQ(owner->name, "sim amd:5");
    EXPECT_EQ(owner->device, &doomed);
  }
  EXPECT_FALSE(SimAddressSpace::instance().ownerOf(memory).has_value())
      << "reclaimed with the device (its memory may be reused by anyone)";
}

}  // namespace
}  // namespace hc::device
