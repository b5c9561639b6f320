// Injected faults (the N-th copy fails, slow streams), what a failed stream reports, and tearing
// a device down with streams, events, imports and pinned memory still live.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/simdev/sim_allocation.h"
#include "daemon/device/sim/sim_device.h"
#include "tests/unit/daemon/device/sim/sim_test_util.h"

namespace hc::device {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool mentions(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// Copies i = 1..6 each move value i into its own slot; copy 3 is the injected fault.
TEST(SimDeviceFaultTest, ExactlyTheNthCopyFailsAndOnlyItsStreamStaysFailed) {
  SimDevice device(Vendor::Nvidia, 0, {}, SimFaults{3, 0}, nullptr);
  StreamId s1 = *device.createStream();
  StreamId s2 = *device.createStream();
  std::vector<int> src = {0, 1, 2, 3, 4, 5, 6}, dst(7, 0);
  auto copy = [&](StreamId s, int i) { return device.copyAsync(s, &dst[i], &src[i], sizeof(int)); };
  ASSERT_TRUE(copy(s1, 1).isOk());
  ASSERT_TRUE(device.synchronize(s1).isOk());
  ASSERT_TRUE(copy(s2, 2).isOk());
  ASSERT_TRUE(device.synchronize(s2).isOk());
  EventId before = *device.recordEvent(s1);
  ASSERT_TRUE(copy(s1, 3).isOk()) << "the fault shows when the copy runs, not at enqueue";
  ASSERT_TRUE(copy(s1, 4).isOk());
  EventId after = *device.recordEvent(s1);

  Status failed = device.synchronize(s1);
  EXPECT_EQ(failed.code(), Code::DeviceError);
  EXPECT_TRUE(mentions(failed, "injected copy fault on sim nvidia:0")) << failed.message();
  EXPECT_EQ(dst[1], 1);
  EXPECT_EQ(dst[2], 2);
  EXPECT_EQ(dst[3], 0) << "the faulting copy moved nothing";
  EXPECT_EQ(dst[4], 0) << "work after the fault on that stream is skipped";
  // Sticky: every later query and sync on the stream reports it, even for an earlier event.
  EXPECT_EQ(device.queryEvent(after).status().code(), Code::DeviceError);
  EXPECT_EQ(device.queryEvent(before).status().code(), Code::DeviceError);
  EXPECT_EQ(device.synchronize(s1).code(), Code::DeviceError);
  ASSERT_TRUE(copy(s1, 5).isOk());  // copy 5: enqueued, then skipped
  EXPECT_EQ(device.synchronize(s1).code(), Code::DeviceError);
  EXPECT_EQ(dst[5], 0);

  // The other stream and a new one are healthy: only that one copy was faulted.
  ASSERT_TRUE(copy(s2, 6).isOk());  // copy 6
  EXPECT_TRUE(device.synchronize(s2).isOk());
  EXPECT_EQ(dst[6], 6);
  StreamId s3 = *device.createStream();
  ASSERT_TRUE(copy(s3, 5).isOk());  // copy 7
  EXPECT_TRUE(device.synchronize(s3).isOk());
  EXPECT_EQ(dst[5], 5);
  EXPECT_EQ(device.copiesEnqueued(), 7u);

  // Destroying the failed stream is fine; its events still tell what happened.
  EXPECT_TRUE(device.destroyStream(s1).isOk());
  EXPECT_EQ(device.queryEvent(after).status().code(), Code::DeviceError);
  EXPECT_TRUE(device.releaseEvent(before).isOk());
  EXPECT_TRUE(device.releaseEvent(after).isOk());
  EXPECT_TRUE(device.destroyStream(s2).isOk());
  EXPECT_TRUE(device.destroyStream(s3).isOk());
}

TEST(SimDeviceFaultTest, NoFaultWhenOff) {
  SimDevice device(Vendor::Amd, 0, {}, SimFaults{}, nullptr);
  StreamId s = *device.createStream();
  int a = 1, b = 0;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(device.copyAsync(s, &b, &a, sizeof(int)).isOk());
  EXPECT_TRUE(device.synchronize(s).isOk());
  EXPECT_TRUE(device.destroyStream(s).isOk());
}

TEST(SimDeviceFaultTest, TheFaultMessageNamesTheDevice) {
  SimDevice device(Vendor::Amd, 2, {}, SimFaults{1, 0}, nullptr);
  StreamId s = *device.createStream();
  int a = 1, b = 0;
  ASSERT_TRUE(device.copyAsync(s, &b, &a, sizeof(int)).isOk());
  EventId event = *device.recordEvent(s);
  Result<bool> done = testing::waitEvent(device, event);
  ASSERT_FALSE(done.isOk());
  EXPECT_EQ(done.status().code(), Code::DeviceError);
  EXPECT_TRUE(mentions(done.status(), "injected copy fault on sim amd:2"))
      << done.status().message();
  EXPECT_TRUE(device.releaseEvent(event).isOk());
  EXPECT_TRUE(device.destroyStream(s).isOk());
}

TEST(SimDeviceFaultTest, ASlowStreamDelaysEveryTask) {
  SimDevice device(Vendor::Nvidia, 0, {}, SimFaults{0, 10000}, nullptr);  // 10 ms per task
  StreamId s = *device.createStream();
  int a = 1, b = 0;
  auto start = Clock::now();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(device.copyAsync(s, &b, &a, sizeof(int)).isOk());
  ASSERT_TRUE(device.synchronize(s).isOk());
  EXPECT_GE(secondsSince(start), 0.029);
  EXPECT_EQ(b, 1);
  EXPECT_TRUE(device.destroyStream(s).isOk());
}

TEST(SimDeviceFaultTest, TimingSlowsCopiesByTheirBytes) {
  // 1 MiB at 0.05 GB/s = 21 ms.
  SimDevice device(Vendor::Nvidia, 0, simdev::StreamTiming{0.05, 0, 0}, {}, nullptr);
  StreamId s = *device.createStream();
  std::vector<uint8_t> src(1 << 20, 7), dst(1 << 20, 0);
  auto start = Clock::now();
  ASSERT_TRUE(device.copyAsync(s, dst.data(), src.data(), src.size()).isOk());
  ASSERT_TRUE(device.synchronize(s).isOk());
  EXPECT_GE(secondsSince(start), 0.020);
  EXPECT_EQ(dst, src);
  EXPECT_TRUE(device.destroyStream(s).isOk());
}

// The queued copies out of the import still run (and see mapped memory) before the device
// unmaps it; nothing hangs although every stream has work and a 1 s delay pending.
TEST(SimDeviceFaultTest, DestroyingADeviceWithLiveStreamsImportsAndEventsReclaimsThem) {
  auto allocation = simdev::SimAllocation::create(1 << 16, "teardown");
  ASSERT_TRUE(allocation.isOk());
  for (size_t i = 0; i < allocation->bytes(); ++i) allocation->data()[i] = static_cast<uint8_t>(i);
  std::vector<std::vector<uint8_t>> outs(4, std::vector<uint8_t>(1 << 16, 0));
  auto start = Clock::now();
  {
    auto device = std::make_unique<SimDevice>(
        Vendor::Nvidia, 0, simdev::StreamTiming{0, 1000000, 0}, SimFaults{}, nullptr);
    BufferHandle handle;
    handle.type = MemoryType::Sim;
    handle.fd = allocation->fd();
    handle.size = allocation->bytes();
    Result<ImportedBuffer> imported = device->importBuffer(handle);
    ASSERT_TRUE(imported.isOk()) << imported.status().toString();
    ASSERT_TRUE(device->allocPinned(1 << 20).isOk());
    for (auto& out : outs) {
      StreamId s = *device->createStream();
      ASSERT_TRUE(device->copyAsync(s, out.data(), imported->ptr, out.size()).isOk());
      ASSERT_TRUE(device->recordEvent(s).isOk());
    }
  }
  EXPECT_LT(secondsSince(start), 10.0) << "teardown cuts the simulated delays short";
  for (const auto& out : outs) {
    EXPECT_EQ(std::memcmp(out.data(), allocation->data(), out.size()), 0);
  }
}

}  // namespace
}  // namespace hc::device
