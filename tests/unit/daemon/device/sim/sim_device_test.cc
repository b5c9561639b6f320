// SimDevice against the Device contract, as host_device_test.cc checks the host device, plus what
// only an asynchronous device shows: work runs on the stream's worker, events complete later.
#include "daemon/device/sim/sim_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/unit/daemon/device/sim/sim_test_util.h"

namespace hc::device {
namespace {

using testing::Gate;
using testing::kInt32;
using testing::kMax;
using testing::kSum;
using testing::TestKernel;

class SimDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<StreamId> s = device_.createStream();
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    stream_ = *s;
  }
  void TearDown() override {
    gate_.open = true;
    EXPECT_TRUE(device_.destroyStream(stream_).isOk());
  }

  std::atomic<size_t> elements_{0};
  Gate gate_;
  std::atomic<std::thread::id> kernelThread_{};
  SimDevice device_{Vendor::Nvidia, 0, {}, {}, TestKernel{&elements_, &gate_, &kernelThread_}};
  StreamId stream_ = 0;
};

TEST_F(SimDeviceTest, DescribesASimulatedGpu) {
  const DeviceInfo& info = device_.info();
  EXPECT_EQ(info.vendor, Vendor::Nvidia);
  EXPECT_EQ(info.index, 0);
  EXPECT_EQ(info.backend, "sim");
  EXPECT_EQ(info.model, "simulated NVIDIA GPU");
  EXPECT_EQ(info.memoryBytes, 16ull << 30);
  EXPECT_EQ(info.pciBusId, "");
  EXPECT_EQ(device_.name(), "sim nvidia:0");
  const Capabilities& caps = device_.capabilities();
  EXPECT_TRUE(caps.ipcImport);
  EXPECT_TRUE(caps.reduceKernels);
  EXPECT_TRUE(caps.streamOrdering);
  EXPECT_FALSE(caps.pinnedStaging);
  EXPECT_TRUE(caps.transportMemory.empty()) << "the transport cannot read sim memory";
  EXPECT_FALSE(caps.transportCanAccess(MemoryType::Sim));
  EXPECT_FALSE(caps.transportCanAccess(MemoryType::Host));

  SimDevice amd(Vendor::Amd, 3, {}, {}, nullptr, 1ull << 30);
  EXPECT_EQ(amd.info().vendor, Vendor::Amd);
  EXPECT_EQ(amd.info().index, 3);
  EXPECT_EQ(amd.info().model, "simulated AMD GPU");
  EXPECT_EQ(amd.info().memoryBytes, 1ull << 30);
  EXPECT_FALSE(amd.capabilities().reduceKernels);
  EXPECT_EQ(amd.name(), "sim amd:3");
}

TEST_F(SimDeviceTest, CopyMovesTheBytes) {
  std::vector<uint8_t> src(4097), dst(4097, 0);
  std::iota(src.begin(), src.end(), uint8_t{1});
  ASSERT_TRUE(device_.copyAsync(stream_, dst.data(), src.data(), src.size()).isOk());
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_EQ(dst, src);
}

TEST_F(SimDeviceTest, CopyRejectsPartialOverlapButAllowsInPlace) {
  std::vector<uint8_t> buf(64, 7);
  EXPECT_EQ(device_.copyAsync(stream_, buf.data() + 1, buf.data(), 32).code(),
            Code::InvalidArgument);
  EXPECT_TRUE(device_.copyAsync(stream_, buf.data(), buf.data(), 32).isOk());
  EXPECT_TRUE(device_.copyAsync(stream_, buf.data() + 32, buf.data(), 32).isOk());  // adjacent
  EXPECT_TRUE(device_.copyAsync(stream_, nullptr, nullptr, 0).isOk());
  EXPECT_EQ(device_.copyAsync(stream_, nullptr, buf.data(), 1).code(), Code::InvalidArgument);
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_EQ(device_.copiesEnqueued(), 1u) << "no-op copies are neither enqueued nor counted";
}

TEST_F(SimDeviceTest, UnknownOrDestroyedStreamIsNotFound) {
  uint8_t a = 1, b = 0;
  EXPECT_EQ(device_.copyAsync(999, &b, &a, 1).code(), Code::NotFound);
  StreamId other = *device_.createStream();
  ASSERT_TRUE(device_.destroyStream(other).isOk());
  EXPECT_EQ(device_.copyAsync(other, &b, &a, 1).code(), Code::NotFound);
  EXPECT_EQ(device_.recordEvent(other).status().code(), Code::NotFound);
  EXPECT_EQ(device_.synchronize(other).code(), Code::NotFound);
  EXPECT_EQ(device_.destroyStream(other).code(), Code::NotFound);
  int32_t x = 1;
  const void* inputs[] = {&x};
  void* outputs[] = {&x};
  EXPECT_EQ(device_.reduceAsync(other, ReduceWork{kInt32, kSum, inputs, outputs, {}, 1, 1}).code(),
            Code::NotFound);
}

TEST_F(SimDeviceTest, ReduceRunsTheGivenKernelOnTheStreamsWorker) {
  constexpr size_t kCount = 1000;
  std::vector<int32_t> a(kCount), b(kCount), c(kCount, -1), out(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<int32_t>(i);
    b[i] = 2 * static_cast<int32_t>(i);
  }
  {
    // The descriptor's arrays die before the work runs: the device must have copied them.
    std::vector<const void*> inputs = {a.data(), b.data(), c.data()};
    std::vector<void*> outputs = {out.data(), a.data()};  // in place over input 0 as well
    ReduceWork work{kInt32, kSum, inputs, outputs, {}, 3, kCount};
    gate_.open = false;
    ASSERT_TRUE(device_.reduceAsync(stream_, work).isOk());
    std::fill(inputs.begin(), inputs.end(), nullptr);
    std::fill(outputs.begin(), outputs.end(), nullptr);
  }
  EXPECT_EQ(elements_.load(), 0u) << "enqueue does not run the kernel";
  gate_.open = true;
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(out[i], 3 * static_cast<int32_t>(i) - 1) << i;
    ASSERT_EQ(a[i], out[i]) << i;
  }
  EXPECT_EQ(elements_.load(), kCount);
  EXPECT_NE(kernelThread_.load(), std::this_thread::get_id());
}

TEST_F(SimDeviceTest, ReduceRejectsMalformedWork) {
  int32_t x = 1, y = 2;
  const void* inputs[] = {&x, &y};
  const void* nullInput[] = {&x, nullptr};
  void* outputs[] = {&y};
  const uint64_t oneScalar[] = {1};
  ReduceWork work;
  work.dtype = Dtype{kInt32};
  work.redop = RedOp{kSum};
  work.nRanks = 2;
  work.count = 1;
  work.outputs = outputs;
  EXPECT_EQ(device_.reduceAsync(stream_, work).code(), Code::InvalidArgument);  // no inputs
  work.inputs = nullInput;
  EXPECT_EQ(device_.reduceAsync(stream_, work).code(), Code::InvalidArgument);
  work.inputs = inputs;
  work.scalars = oneScalar;  // one scalar for two inputs
  EXPECT_EQ(device_.reduceAsync(stream_, work).code(), Code::InvalidArgument);
  work.scalars = {};
  work.nRanks = 0;
  EXPECT_EQ(device_.reduceAsync(stream_, work).code(), Code::InvalidArgument);
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_EQ(elements_.load(), 0u);
}

TEST(SimDeviceNoKernelTest, ReduceIsADeviceErrorAndSaysSoUpFront) {
  SimDevice device(Vendor::Amd, 0, {}, {}, nullptr);
  EXPECT_FALSE(device.capabilities().reduceKernels);
  StreamId stream = *device.createStream();
  int32_t x = 1;
  const void* inputs[] = {&x};
  void* outputs[] = {&x};
  ReduceWork work{kInt32, kSum, inputs, outputs, {}, 1, 1};
  EXPECT_EQ(device.reduceAsync(stream, work).code(), Code::DeviceError);
  EXPECT_TRUE(device.destroyStream(stream).isOk());
}

// Each op reads what the one before it wrote, so a wrong order shows in the result.
TEST_F(SimDeviceTest, StreamRunsOpsInEnqueueOrder) {
  constexpr size_t kCount = 256;
  std::vector<int32_t> a(kCount, 5), b(kCount, 0), c(kCount, 0), d(kCount, 0);
  const size_t bytes = kCount * sizeof(int32_t);
  gate_.open = false;  // hold the first reduction so later copies would overtake a broken order
  ASSERT_TRUE(device_.copyAsync(stream_, b.data(), a.data(), bytes).isOk());  // b = 5
  const void* inputs[] = {a.data(), b.data()};
  void* outputs[] = {c.data()};
  ASSERT_TRUE(device_.reduceAsync(stream_, ReduceWork{kInt32, kSum, inputs, outputs, {}, 2, kCount})
                  .isOk());                                                   // c = 10
  ASSERT_TRUE(device_.copyAsync(stream_, d.data(), c.data(), bytes).isOk());  // d = 10
  const void* again[] = {d.data(), c.data(), b.data()};
  void* into[] = {a.data()};
  ASSERT_TRUE(device_.reduceAsync(stream_, ReduceWork{kInt32, kMax, again, into, {}, 3, kCount})
                  .isOk());  // a = 10
  Result<EventId> event = device_.recordEvent(stream_);
  ASSERT_TRUE(event.isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(*device_.queryEvent(*event)) << "the first reduction is still held";
  EXPECT_EQ(d[0], 0);
  gate_.open = true;
  Result<bool> done = testing::waitEvent(device_, *event);
  ASSERT_TRUE(done.isOk()) << done.status().toString();
  EXPECT_TRUE(*done);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(d[i], 10);
    ASSERT_EQ(a[i], 10);
  }
  EXPECT_TRUE(device_.releaseEvent(*event).isOk());
}

TEST_F(SimDeviceTest, EventsCompleteWithTheirWorkAndReleaseOnce) {
  Result<EventId> empty = device_.recordEvent(stream_);
  ASSERT_TRUE(empty.isOk());
  EXPECT_TRUE(*device_.queryEvent(*empty)) << "nothing was enqueued before it";
  int32_t x = 1;
  const void* inputs[] = {&x};
  void* outputs[] = {&x};
  gate_.open = false;
  ASSERT_TRUE(
      device_.reduceAsync(stream_, ReduceWork{kInt32, kSum, inputs, outputs, {}, 1, 1}).isOk());
  Result<EventId> pending = device_.recordEvent(stream_);
  ASSERT_TRUE(pending.isOk());
  EXPECT_NE(*empty, *pending);
  EXPECT_FALSE(*device_.queryEvent(*pending));
  EXPECT_FALSE(*device_.queryEvent(*pending)) << "querying does not consume";
  EXPECT_TRUE(*device_.queryEvent(*empty)) << "an earlier event is unaffected by later work";
  gate_.open = true;
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_TRUE(*device_.queryEvent(*pending)) << "synchronize completes every earlier event";
  ASSERT_TRUE(device_.releaseEvent(*empty).isOk());
  EXPECT_EQ(device_.queryEvent(*empty).status().code(), Code::NotFound);
  EXPECT_EQ(device_.releaseEvent(*empty).code(), Code::NotFound);
  EXPECT_TRUE(device_.releaseEvent(*pending).isOk());
}

TEST_F(SimDeviceTest, AnEventOutlivesItsDestroyedStream) {
  StreamId other = *device_.createStream();
  std::vector<uint8_t> src(100, 9), dst(100, 0);
  ASSERT_TRUE(device_.copyAsync(other, dst.data(), src.data(), 100).isOk());
  EventId event = *device_.recordEvent(other);
  ASSERT_TRUE(device_.destroyStream(other).isOk()) << "waits for the pending copy";
  EXPECT_EQ(dst, src);
  Result<bool> done = device_.queryEvent(event);
  ASSERT_TRUE(done.isOk()) << done.status().toString();
  EXPECT_TRUE(*done);
  EXPECT_TRUE(device_.releaseEvent(event).isOk());
}

TEST_F(SimDeviceTest, PinnedMemoryIsPageAlignedZeroedAndFreedOnce) {
  Result<void*> pinned = device_.allocPinned(10000);
  ASSERT_TRUE(pinned.isOk()) << pinned.status().toString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*pinned) % 4096, 0u);
  auto* bytes = static_cast<uint8_t*>(*pinned);
  EXPECT_TRUE(std::all_of(bytes, bytes + 10000, [](uint8_t b) { return b == 0; }));
  std::memset(bytes, 0xab, 10000);
  ASSERT_TRUE(device_.freePinned(*pinned).isOk());
  EXPECT_EQ(device_.freePinned(*pinned).code(), Code::NotFound);
  int notPinned = 0;
  EXPECT_EQ(device_.freePinned(&notPinned).code(), Code::NotFound);
  EXPECT_EQ(device_.allocPinned(0).status().code(), Code::InvalidArgument);
  // Left allocated on purpose: the destructor reclaims it.
  EXPECT_TRUE(device_.allocPinned(1).isOk());
}

TEST_F(SimDeviceTest, StreamsOnSeveralThreadsStayIndependent) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Result<StreamId> stream = device_.createStream();
      if (!stream.isOk()) return void(++failures);
      for (int r = 0; r < kRounds; ++r) {
        std::vector<int32_t> in(64, t * 1000 + r), out(64, -1);
        if (!device_.copyAsync(*stream, out.data(), in.data(), 64 * 4).isOk()) ++failures;
        Result<EventId> event = device_.recordEvent(*stream);
        if (!event.isOk()) {
          ++failures;
          continue;
        }
        Result<bool> done = testing::waitEvent(device_, *event);
        if (!done.isOk() || !*done) ++failures;
        if (!device_.releaseEvent(*event).isOk()) ++failures;
        if (out != in) ++failures;
      }
      if (!device_.destroyStream(*stream).isOk()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(device_.copiesEnqueued(), static_cast<uint64_t>(kThreads * kRounds));
}

}  // namespace
}  // namespace hc::device
