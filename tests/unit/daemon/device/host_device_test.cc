// HostDevice: copies, reductions through the kernel it was given, stream ordering, events,
// imports (host handles only) and pinned memory. The kernel here is the test's own int32 one,
// so these tests do not depend on coll/.
#include "daemon/device/host/host_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace hc::device {
namespace {

constexpr Dtype kInt32 = Dtype{2};  // ncclInt32
constexpr RedOp kSum = RedOp{0};    // ncclSum
constexpr RedOp kMax = RedOp{2};    // ncclMax

// int32 sum and max; counts the elements it was asked to reduce.
struct TestKernel {
  std::atomic<size_t>* elements;
  void operator()(const ReduceWork& work, size_t begin, size_t end) const {
    ASSERT_EQ(work.dtype, kInt32);
    for (size_t e = begin; e < end; ++e) {
      int32_t acc = static_cast<const int32_t*>(work.inputs[0])[e];
      for (size_t i = 1; i < work.inputs.size(); ++i) {
        int32_t x = static_cast<const int32_t*>(work.inputs[i])[e];
        acc = work.redop == kMax ? std::max(acc, x) : acc + x;
      }
      for (void* out : work.outputs) static_cast<int32_t*>(out)[e] = acc;
    }
    *elements += end - begin;
  }
};

class HostDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<StreamId> s = device_.createStream();
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    stream_ = *s;
  }
  void TearDown() override { EXPECT_TRUE(device_.destroyStream(stream_).isOk()); }

  std::atomic<size_t> elements_{0};
  HostDevice device_{TestKernel{&elements_}};
  StreamId stream_ = 0;
};

TEST_F(HostDeviceTest, DescribesTheHost) {
  EXPECT_EQ(device_.info().vendor, Vendor::Host);
  EXPECT_EQ(device_.info().backend, "host");
  EXPECT_FALSE(device_.info().model.empty());
  EXPECT_GT(device_.info().memoryBytes, 0u);
  const Capabilities& caps = device_.capabilities();
  EXPECT_TRUE(caps.reduceKernels);
  EXPECT_FALSE(caps.ipcImport);
  EXPECT_FALSE(caps.streamOrdering);
  EXPECT_TRUE(caps.transportCanAccess(MemoryType::Host));
  EXPECT_FALSE(caps.transportCanAccess(MemoryType::Cuda));
}

TEST_F(HostDeviceTest, CopyMovesTheBytes) {
  std::vector<uint8_t> src(4097), dst(4097, 0);
  std::iota(src.begin(), src.end(), uint8_t{1});
  ASSERT_TRUE(device_.copyAsync(stream_, dst.data(), src.data(), src.size()).isOk());
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  EXPECT_EQ(dst, src);
}

TEST_F(HostDeviceTest, CopyRejectsPartialOverlapButAllowsInPlace) {
  std::vector<uint8_t> buf(64, 7);
  Status s = device_.copyAsync(stream_, buf.data() + 1, buf.data(), 32);
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_TRUE(device_.copyAsync(stream_, buf.data(), buf.data(), 32).isOk());
  EXPECT_TRUE(device_.copyAsync(stream_, buf.data() + 32, buf.data(), 32).isOk());  // adjacent
  EXPECT_TRUE(device_.copyAsync(stream_, nullptr, nullptr, 0).isOk());
  EXPECT_EQ(device_.copyAsync(stream_, nullptr, buf.data(), 1).code(), Code::InvalidArgument);
}

TEST_F(HostDeviceTest, UnknownOrDestroyedStreamIsNotFound) {
  uint8_t a = 1, b = 0;
  EXPECT_EQ(device_.copyAsync(999, &b, &a, 1).code(), Code::NotFound);
  StreamId other = *device_.createStream();
  ASSERT_TRUE(device_.destroyStream(other).isOk());
  EXPECT_EQ(device_.copyAsync(other, &b, &a, 1).code(), Code::NotFound);
  EXPECT_EQ(device_.recordEvent(other).status().code(), Code::NotFound);
  EXPECT_EQ(device_.synchronize(other).code(), Code::NotFound);
  EXPECT_EQ(device_.destroyStream(other).code(), Code::NotFound);
}

TEST_F(HostDeviceTest, ReduceRunsTheGivenKernelIntoEveryOutput) {
  constexpr size_t kCount = 1000;
  std::vector<int32_t> a(kCount), b(kCount), c(kCount), out(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<int32_t>(i);
    b[i] = 2 * static_cast<int32_t>(i);
    c[i] = -1;
  }
  const void* inputs[] = {a.data(), b.data(), c.data()};
  void* outputs[] = {out.data(), a.data()};  // a second output in place over input 0
  ReduceWork work;
  work.dtype = Dtype{kInt32};
  work.redop = RedOp{kSum};
  work.inputs = inputs;
  work.outputs = outputs;
  work.nRanks = 3;
  work.count = kCount;
  ASSERT_TRUE(device_.reduceAsync(stream_, work).isOk());
  ASSERT_TRUE(device_.synchronize(stream_).isOk());
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(out[i], 3 * static_cast<int32_t>(i) - 1) << i;
    ASSERT_EQ(a[i], out[i]) << i;
  }
  EXPECT_EQ(elements_.load(), kCount);
}

TEST_F(HostDeviceTest, ReduceRejectsMalformedWork) {
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
  EXPECT_EQ(elements_.load(), 0u);
}

TEST(HostDeviceNoKernelTest, ReduceIsADeviceErrorAndSaysSoUpFront) {
  HostDevice device(nullptr);
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
TEST_F(HostDeviceTest, StreamRunsOpsInEnqueueOrder) {
  constexpr size_t kCount = 256;
  std::vector<int32_t> a(kCount, 5), b(kCount, 0), c(kCount, 0), d(kCount, 0);
  const size_t bytes = kCount * sizeof(int32_t);
  ASSERT_TRUE(device_.copyAsync(stream_, b.data(), a.data(), bytes).isOk());  // b = 5
  const void* inputs[] = {a.data(), b.data()};
  void* outputs[] = {c.data()};
  ReduceWork work{kInt32, kSum, inputs, outputs, {}, 2, kCount};
  ASSERT_TRUE(device_.reduceAsync(stream_, work).isOk());                     // c = 10
  ASSERT_TRUE(device_.copyAsync(stream_, d.data(), c.data(), bytes).isOk());  // d = 10
  const void* again[] = {d.data(), c.data(), b.data()};
  void* into[] = {a.data()};
  ReduceWork work2{kInt32, kMax, again, into, {}, 3, kCount};
  ASSERT_TRUE(device_.reduceAsync(stream_, work2).isOk());  // a = 10
  Result<EventId> event = device_.recordEvent(stream_);
  ASSERT_TRUE(event.isOk());
  Result<bool> done = device_.queryEvent(*event);
  ASSERT_TRUE(done.isOk());
  EXPECT_TRUE(*done);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(d[i], 10);
    ASSERT_EQ(a[i], 10);
  }
  EXPECT_TRUE(device_.releaseEvent(*event).isOk());
}

TEST_F(HostDeviceTest, EventsCompleteAtRecordAndReleaseOnce) {
  Result<EventId> first = device_.recordEvent(stream_);
  Result<EventId> second = device_.recordEvent(stream_);
  ASSERT_TRUE(first.isOk() && second.isOk());
  EXPECT_NE(*first, *second);
  EXPECT_TRUE(*device_.queryEvent(*first));
  EXPECT_TRUE(*device_.queryEvent(*first));  // querying does not consume
  ASSERT_TRUE(device_.releaseEvent(*first).isOk());
  EXPECT_EQ(device_.queryEvent(*first).status().code(), Code::NotFound);
  EXPECT_EQ(device_.releaseEvent(*first).code(), Code::NotFound);
  EXPECT_TRUE(device_.releaseEvent(*second).isOk());
}

TEST_F(HostDeviceTest, ImportsAnInProcessHostBuffer) {
  std::vector<uint8_t> memory(100);
  Result<ImportedBuffer> imported = device_.importBuffer(hostBufferHandle(memory.data(), 100));
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  EXPECT_EQ(imported->ptr, memory.data());
  EXPECT_EQ(imported->size, 100u);
  EXPECT_NE(imported->id, 0u);
  ImportedBuffer copy = *imported;
  ASSERT_TRUE(device_.releaseBuffer(*imported).isOk());
  EXPECT_EQ(imported->id, 0u);
  EXPECT_EQ(imported->ptr, nullptr);
  EXPECT_EQ(device_.releaseBuffer(copy).code(), Code::NotFound);
}

TEST_F(HostDeviceTest, ImportRejectsNonHostHandlesWithAClearError) {
  uint8_t memory[16];
  for (MemoryType type : {MemoryType::Sim, MemoryType::Cuda, MemoryType::Hip}) {
    BufferHandle handle = hostBufferHandle(memory, sizeof(memory));
    handle.type = type;
    Result<ImportedBuffer> imported = device_.importBuffer(handle);
    ASSERT_FALSE(imported.isOk());
    EXPECT_EQ(imported.status().code(), Code::InvalidArgument);
    EXPECT_NE(imported.status().message().find(memoryTypeName(type)), std::string::npos)
        << imported.status().message();
    EXPECT_NE(imported.status().message().find("host memory only"), std::string::npos);
  }
  BufferHandle withFd = hostBufferHandle(memory, sizeof(memory));
  withFd.fd = 0;
  EXPECT_EQ(device_.importBuffer(withFd).status().code(), Code::InvalidArgument);
  BufferHandle shortBytes = hostBufferHandle(memory, sizeof(memory));
  shortBytes.bytes.resize(4);
  EXPECT_EQ(device_.importBuffer(shortBytes).status().code(), Code::InvalidArgument);
  EXPECT_EQ(device_.importBuffer(hostBufferHandle(nullptr, 8)).status().code(),
            Code::InvalidArgument);
}

TEST_F(HostDeviceTest, PinnedMemoryIsPageAlignedZeroedAndFreedOnce) {
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
  // Left allocated on purpose: the destructor reclaims it (a sanitizer build would flag a leak).
  EXPECT_TRUE(device_.allocPinned(1).isOk());
}

TEST_F(HostDeviceTest, StreamsOnSeveralThreadsStayIndependent) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Result<StreamId> stream = device_.createStream();
      if (!stream.isOk()) return void(++failures);
      std::vector<int32_t> in(64, t), out(64, -1);
      for (int r = 0; r < kRounds; ++r) {
        if (!device_.copyAsync(*stream, out.data(), in.data(), 64 * 4).isOk()) ++failures;
        Result<EventId> event = device_.recordEvent(*stream);
        if (!event.isOk() || !*device_.queryEvent(*event)) ++failures;
        if (!event.isOk() || !device_.releaseEvent(*event).isOk()) ++failures;
        if (out != in) ++failures;
      }
      if (!device_.destroyStream(*stream).isOk()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace hc::device
