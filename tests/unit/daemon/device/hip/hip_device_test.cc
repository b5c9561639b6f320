// HipDevice over a fake HIP runtime (fake_hip_runtime.h): the backend's own logic without a GPU.
// Properties and capabilities, the import size check, the ABI-dependent IPC flag, the kernel
// module and its host-staging fallback, stream and event bookkeeping, and how reductions are
// planned into launches (checked for exact results by running the shared kernel math on the
// host). Whether the real runtime and GPU behave as the fake does is not tested here.
#include "daemon/device/hip/hip_device.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "daemon/device/hip/hip_kernel_image.h"
#include "tests/unit/daemon/device/hip/fake_hip_ipc.h"
#include "tests/unit/daemon/device/hip/fake_hip_runtime.h"
#include "tests/unit/daemon/device/memfd_allocation.h"

namespace hc::device {
namespace {

using testing::FakeHipRuntime;
namespace k = kernels;

constexpr RedOp kSum = RedOp{0}, kAvg = RedOp{4}, kPreMulSum = RedOp{5};  // ncclRedOp_t values
const std::vector<uint8_t> kSomeImage = {1, 2, 3};                        // the fake loads anything

BufferHandle hipHandle(uint64_t size) {
  BufferHandle handle;
  handle.type = MemoryType::Hip;
  handle.bytes.assign(64, 0xab);
  handle.size = size;
  return handle;
}

class HipDeviceTest : public ::testing::Test {
 protected:
  std::unique_ptr<HipDevice> open(std::span<const uint8_t> image) {
    Result<std::unique_ptr<HipDevice>> device = HipDevice::open(runtime_.api(), 3, image);
    EXPECT_TRUE(device.isOk()) << device.status().toString();
    return device.isOk() ? std::move(device).value() : nullptr;
  }

  FakeHipRuntime runtime_;  // declared first: outlives every device
};

TEST_F(HipDeviceTest, OpensWithPropertiesCapabilitiesAndKernels) {
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  const DeviceInfo& info = device->info();
  EXPECT_EQ(info.index, 3);
  EXPECT_EQ(info.vendor, Vendor::Amd);
  EXPECT_EQ(info.backend, "hip");
  EXPECT_EQ(info.model, "Fake Instinct MI250X");
  EXPECT_EQ(info.pciBusId, "0000:c1:00.0");  // lower case, as sysfs spells it
  EXPECT_EQ(info.memoryBytes, uint64_t{64} << 30);
  const Capabilities& caps = device->capabilities();
  EXPECT_TRUE(caps.ipcImport && caps.reduceKernels && caps.streamOrdering && caps.pinnedStaging);
  EXPECT_TRUE(device->stagingFallbackReason().empty());
  EXPECT_EQ(runtime_.state().functionsLookedUp.size(), k::kNumKernelDtypes);
  EXPECT_EQ(device->memoryUse().setupBytes(), runtime_.state().moduleBytes);
}

TEST_F(HipDeviceTest, ModuleThatDoesNotLoadFallsBackToStagingAndSaysWhy) {
  runtime_.state().moduleLoadResult = hipErrorNoBinaryForGpu;
  auto device = open(reduceKernelBundle());
  ASSERT_NE(device, nullptr);
  EXPECT_FALSE(device->capabilities().reduceKernels);
  const std::string& why = device->stagingFallbackReason();
  EXPECT_NE(why.find("hipModuleLoadData: hipErrorNoBinaryForGpu"), std::string::npos) << why;
  EXPECT_NE(why.find("gfx90a"), std::string::npos) << why;  // the bundle's targets are named
  Result<StreamId> stream = device->createStream();
  ASSERT_TRUE(stream.isOk());
  std::vector<int32_t> a(4, 1), out(4);
  const void* inputs[] = {a.data()};
  void* outputs[] = {out.data()};
  ReduceWork work{static_cast<Dtype>(k::kDtypeInt32), kSum, inputs, outputs, {}, 1, 4};
  Status status = device->reduceAsync(*stream, work);
  EXPECT_EQ(status.code(), Code::DeviceError);
  EXPECT_NE(status.message().find("stage the reduction through host memory"), std::string::npos);
  EXPECT_TRUE(runtime_.state().launches.empty());
}

TEST_F(HipDeviceTest, NoKernelImageMeansNoKernels) {
  auto device = open({});
  ASSERT_NE(device, nullptr);
  EXPECT_FALSE(device->capabilities().reduceKernels);
  EXPECT_FALSE(device->stagingFallbackReason().empty());
}

TEST_F(HipDeviceTest, ImportRefusesAClaimLargerThanTheAllocation) {
  std::vector<uint8_t> allocation(1 << 20);
  runtime_.state().ipcPointer = allocation.data();
  runtime_.state().rangeBase = allocation.data();
  runtime_.state().rangeBytes = allocation.size();
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);

  Result<ImportedBuffer> tooLarge = device->importBuffer(hipHandle(allocation.size() + 1));
  ASSERT_FALSE(tooLarge.isOk());
  EXPECT_EQ(tooLarge.status().code(), Code::InvalidArgument);
  ASSERT_EQ(runtime_.state().ipcClosed.size(), 1u) << "a refused mapping must be closed again";

  Result<ImportedBuffer> exact = device->importBuffer(hipHandle(allocation.size()));
  ASSERT_TRUE(exact.isOk()) << exact.status().toString();
  EXPECT_EQ(exact->ptr, allocation.data());
  ImportedBuffer buffer = *exact;
  ASSERT_TRUE(device->releaseBuffer(buffer).isOk());
  EXPECT_EQ(runtime_.state().ipcClosed.size(), 2u);
  EXPECT_EQ(buffer.id, 0u);
  ImportedBuffer again = *exact;
  EXPECT_EQ(device->releaseBuffer(again).code(), Code::NotFound);
}

TEST_F(HipDeviceTest, ImportRefusesOtherHandleForms) {
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  BufferHandle cuda = hipHandle(64);
  cuda.type = MemoryType::Cuda;
  EXPECT_EQ(device->importBuffer(cuda).status().code(), Code::InvalidArgument);
  BufferHandle shortHandle = hipHandle(64);
  shortHandle.bytes.resize(32);
  EXPECT_EQ(device->importBuffer(shortHandle).status().code(), Code::InvalidArgument);
  BufferHandle withFd = hipHandle(64);
  withFd.fd = 0;
  EXPECT_EQ(device->importBuffer(withFd).status().code(), Code::InvalidArgument);
  EXPECT_EQ(device->importBuffer(hipHandle(0)).status().code(), Code::InvalidArgument);
  EXPECT_TRUE(runtime_.state().ipcOpenFlags.empty()) << "nothing may reach the runtime";
}

using testing::MemfdAllocation;  // a VMM allocation as its exporter holds it

// A legacy IPC handle that names a memfd, as the client-side fake hands out for hipMalloc memory
// (fake_hip_ipc.h): the fake maps it through /proc, here this process's own.
TEST_F(HipDeviceTest, LegacyIpcHandleOfAMemfdMapsTheSameMemoryUntilReleased) {
  const size_t bytes = 2 * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MemfdAllocation allocation(bytes);
  ASSERT_NE(allocation.view(), nullptr);
  for (size_t i = 0; i < bytes; ++i) allocation.view()[i] = static_cast<uint8_t>(i * 7 + 2);
  fake_hip::IpcHandle named;
  named.address = reinterpret_cast<uintptr_t>(allocation.view());
  named.bytes = bytes;
  named.magic = fake_hip::kIpcMagic;
  named.pid = static_cast<uint64_t>(::getpid());
  named.fd = static_cast<uint64_t>(allocation.fd());
  BufferHandle handle = hipHandle(bytes);
  fake_hip::writeIpcHandle(named, handle.bytes.data());
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);

  BufferHandle tooLarge = handle;
  tooLarge.size = bytes + 1;
  EXPECT_EQ(device->importBuffer(tooLarge).status().code(), Code::InvalidArgument);
  EXPECT_TRUE(runtime_.state().ipcMapped.empty()) << "a refused mapping must be closed again";
  Result<ImportedBuffer> imported = device->importBuffer(handle);
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  auto* mapped = static_cast<uint8_t*>(imported->ptr);
  EXPECT_NE(mapped, allocation.view()) << "a mapping of its own, as in another process";
  EXPECT_EQ(std::memcmp(mapped, allocation.view(), bytes), 0);
  mapped[bytes - 1] = 0x3d;
  EXPECT_EQ(allocation.view()[bytes - 1], 0x3d);
  EXPECT_EQ(runtime_.state().ipcMapped.size(), 1u);

  ImportedBuffer buffer = *imported;
  ASSERT_TRUE(device->releaseBuffer(buffer).isOk());
  EXPECT_TRUE(runtime_.state().ipcMapped.empty()) << "closing the handle unmaps it";
}

BufferHandle vmmHandle(int fd, uint64_t size) {
  BufferHandle handle;
  handle.type = MemoryType::Hip;
  handle.fd = fd;
  handle.size = size;
  return handle;
}

TEST_F(HipDeviceTest, VmmFdImportMapsTheSameMemoryReadWriteOnThisGpu) {
  const size_t bytes = 3 * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MemfdAllocation allocation(bytes);
  ASSERT_NE(allocation.view(), nullptr);
  for (size_t i = 0; i < bytes; ++i) allocation.view()[i] = static_cast<uint8_t>(i * 3 + 1);
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);

  Result<ImportedBuffer> imported = device->importBuffer(vmmHandle(allocation.fd(), bytes));
  ASSERT_TRUE(imported.isOk()) << imported.status().toString();
  EXPECT_EQ(imported->size, bytes);
  auto* mapped = static_cast<uint8_t*>(imported->ptr);
  EXPECT_EQ(std::memcmp(mapped, allocation.view(), bytes), 0);
  mapped[bytes - 1] = 0x5c;  // writable, and shared with the exporter
  EXPECT_EQ(allocation.view()[bytes - 1], 0x5c);
  EXPECT_EQ(runtime_.state().accessDevices, std::vector<int>{3}) << "access for GPU 3 only";
  EXPECT_EQ(runtime_.state().vmmHandles, 0) << "the mapping holds the allocation, not a handle";
  EXPECT_TRUE(runtime_.state().ipcOpenFlags.empty()) << "not a legacy IPC import";

  ImportedBuffer buffer = *imported;
  ASSERT_TRUE(device->releaseBuffer(buffer).isOk());
  EXPECT_EQ(runtime_.state().mappings, 0);
  EXPECT_EQ(runtime_.state().reservations, 0);
  EXPECT_TRUE(runtime_.state().ipcClosed.empty()) << "a VMM import is unmapped, not IPC-closed";
}

TEST_F(HipDeviceTest, VmmFdImportRefusesAClaimLargerThanTheAllocationAndUndoesItself) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MemfdAllocation allocation(page);
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  Result<ImportedBuffer> imported = device->importBuffer(vmmHandle(allocation.fd(), page + 1));
  ASSERT_FALSE(imported.isOk());
  EXPECT_EQ(imported.status().code(), Code::InvalidArgument);
  EXPECT_NE(imported.status().message().find(std::to_string(page + 1) + " bytes"),
            std::string::npos)
      << imported.status().message();
  EXPECT_EQ(runtime_.state().vmmHandles, 0);
  EXPECT_EQ(runtime_.state().reservations, 0);
  EXPECT_EQ(runtime_.state().mappings, 0);
}

TEST_F(HipDeviceTest, VmmImportsLeftBehindAreUnmappedWithTheDevice) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MemfdAllocation allocation(page);
  {
    auto device = open(kSomeImage);
    ASSERT_NE(device, nullptr);
    ASSERT_TRUE(device->importBuffer(vmmHandle(allocation.fd(), page)).isOk());
    EXPECT_EQ(runtime_.state().mappings, 1);
  }
  EXPECT_EQ(runtime_.state().mappings, 0);
  EXPECT_EQ(runtime_.state().reservations, 0);
}

TEST_F(HipDeviceTest, FdHandlesNeedARuntimeWithVmmCalls) {
  runtime_.removeVmm();
  MemfdAllocation allocation(4096);
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  Result<ImportedBuffer> imported = device->importBuffer(vmmHandle(allocation.fd(), 4096));
  ASSERT_FALSE(imported.isOk());
  EXPECT_EQ(imported.status().code(), Code::InvalidArgument);
  EXPECT_NE(imported.status().message().find("hipMemImportFromShareableHandle"), std::string::npos)
      << imported.status().message();
}

// hipIpcMemLazyEnablePeerAccess is 0 in HIP 5.x and 1 in 6.x: the device passes the one its
// runtime expects.
TEST(HipDeviceAbiTest, IpcOpenFlagFollowsTheRuntimeAbi) {
  for (int abi : {5, 6}) {
    FakeHipRuntime runtime(abi);
    std::vector<uint8_t> allocation(4096);
    runtime.state().ipcPointer = runtime.state().rangeBase = allocation.data();
    runtime.state().rangeBytes = allocation.size();
    auto device = HipDevice::open(runtime.api(), 0, {});
    ASSERT_TRUE(device.isOk());
    ASSERT_TRUE((*device)->importBuffer(hipHandle(4096)).isOk());
    ASSERT_EQ(runtime.state().ipcOpenFlags.size(), 1u);
    EXPECT_EQ(runtime.state().ipcOpenFlags[0], abi == 5 ? 0u : 1u) << "ABI " << abi;
  }
}

TEST_F(HipDeviceTest, StreamsAreNonBlockingAndEventsUntimedAndReused) {
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  Result<StreamId> stream = device->createStream();
  ASSERT_TRUE(stream.isOk());
  EXPECT_EQ(runtime_.state().streamFlags.back(), unsigned{hipStreamNonBlocking});
  Result<EventId> first = device->recordEvent(*stream);
  ASSERT_TRUE(first.isOk());
  EXPECT_EQ(runtime_.state().eventFlags.back(), unsigned{hipEventDisableTiming});
  EXPECT_EQ(device->queryEvent(*first).value(), true);
  ASSERT_TRUE(device->releaseEvent(*first).isOk());
  Result<EventId> second = device->recordEvent(*stream);
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ(runtime_.state().eventsCreated, 1) << "a released event is recorded again";
  EXPECT_EQ(device->releaseEvent(*first).code(), Code::NotFound);
  EXPECT_TRUE(device->destroyStream(*stream).isOk());
  EXPECT_EQ(device->copyAsync(*stream, nullptr, nullptr, 0).code(), Code::NotFound);
}

// HIP does not keep a stream failed after a fault; the device does, as Device promises.
TEST_F(HipDeviceTest, FailedEventFailsItsStreamUntilDestroyed) {
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  StreamId stream = device->createStream().value();
  StreamId other = device->createStream().value();
  EventId event = device->recordEvent(stream).value();
  runtime_.state().eventQueryResult = hipErrorLaunchFailure;
  Result<bool> done = device->queryEvent(event);
  ASSERT_FALSE(done.isOk());
  EXPECT_EQ(done.status().code(), Code::DeviceError);
  runtime_.state().eventQueryResult = hipSuccess;

  std::vector<uint8_t> a(16, 7), b(16);
  Status copy = device->copyAsync(stream, b.data(), a.data(), a.size());
  EXPECT_EQ(copy.code(), Code::DeviceError);
  EXPECT_NE(copy.message().find("hipErrorLaunchFailure"), std::string::npos) << copy.message();
  EXPECT_TRUE(device->copyAsync(other, b.data(), a.data(), a.size()).isOk());
  EXPECT_EQ(b[0], 7);
  EXPECT_TRUE(device->destroyStream(stream).isOk());
}

TEST_F(HipDeviceTest, CopiesRejectPartialOverlap) {
  auto device = open(kSomeImage);
  StreamId stream = device->createStream().value();
  std::vector<uint8_t> buffer(64);
  EXPECT_EQ(device->copyAsync(stream, buffer.data() + 8, buffer.data(), 32).code(),
            Code::InvalidArgument);
  EXPECT_TRUE(device->copyAsync(stream, buffer.data(), buffer.data(), 32).isOk());
  EXPECT_EQ(runtime_.state().copies, 0);
}

TEST_F(HipDeviceTest, DeviceMemoryRoundTripsAndIsFreedOnce) {
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  EXPECT_TRUE(device->capabilities().peerCopy);
  EXPECT_EQ(device->allocDevice(0).status().code(), Code::InvalidArgument);
  Result<void*> memory = device->allocDevice(1000);
  ASSERT_TRUE(memory.isOk()) << memory.status().toString();
  StreamId stream = device->createStream().value();
  std::vector<uint8_t> in(1000, 0xa5), out(1000, 0);
  ASSERT_TRUE(device->copyAsync(stream, *memory, in.data(), in.size()).isOk());
  ASSERT_TRUE(device->copyAsync(stream, out.data(), *memory, out.size()).isOk());
  ASSERT_TRUE(device->synchronize(stream).isOk());
  EXPECT_EQ(out, in);
  EXPECT_TRUE(device->freeDevice(*memory).isOk());
  EXPECT_EQ(device->freeDevice(*memory).code(), Code::NotFound);
}

class HipReduceTest : public HipDeviceTest {
 protected:
  void SetUp() override {
    device_ = open(kSomeImage);
    ASSERT_NE(device_, nullptr);
    stream_ = device_->createStream().value();
  }
  std::unique_ptr<HipDevice> device_;
  StreamId stream_ = 0;
};

// 20 inputs take two launches; the second folds the first's partial result in, so the sum and
// the average are those of one pass, and the average divides once, at the end.
TEST_F(HipReduceTest, MoreInputsThanOneLaunchAreChainedExactly) {
  constexpr size_t kRanks = 20, kCount = 1000;
  std::vector<std::vector<int32_t>> data(kRanks, std::vector<int32_t>(kCount));
  std::vector<const void*> inputs;
  for (size_t r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kCount; ++i) data[r][i] = static_cast<int32_t>(r * 1000 + i);
    inputs.push_back(data[r].data());
  }
  for (RedOp op : {kSum, kAvg}) {
    runtime_.state().launches.clear();
    std::vector<int32_t> out(kCount, -1);
    void* outputs[] = {out.data()};
    ReduceWork work{static_cast<Dtype>(k::kDtypeInt32),
                    static_cast<RedOp>(op),
                    inputs,
                    outputs,
                    {},
                    kRanks,
                    kCount};
    ASSERT_TRUE(device_->reduceAsync(stream_, work).isOk());
    ASSERT_EQ(runtime_.state().launches.size(), 2u);
    EXPECT_EQ(runtime_.state().launches[0].redop, uint32_t{k::kRedopSum});
    EXPECT_EQ(runtime_.state().launches[1].redop, static_cast<uint32_t>(op));
    EXPECT_EQ(runtime_.state().launches[1].in[0], out.data()) << "partial first";
    for (size_t i = 0; i < kCount; ++i) {
      int64_t sum = 0;
      for (size_t r = 0; r < kRanks; ++r) sum += data[r][i];
      int64_t expected = op == kSum ? sum : sum / static_cast<int64_t>(kRanks);
      ASSERT_EQ(out[i], expected) << "op " << int(op) << " element " << i;
    }
  }
}

// An output that is also a later input cannot hold the partial: another output is chosen.
TEST_F(HipReduceTest, PartialAvoidsAnOutputThatIsALaterInput) {
  constexpr size_t kRanks = 18;
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(8, 1.0f));
  std::vector<const void*> inputs;
  for (auto& d : data) inputs.push_back(d.data());
  std::vector<float> spare(8);
  void* outputs[] = {data[17].data(), spare.data()};   // rank 17 in place, plus one more
  std::vector<uint64_t> scalars(kRanks, 0x40000000u);  // fp32 2.0
  ReduceWork work{
      static_cast<Dtype>(k::kDtypeFloat32), kPreMulSum, inputs, outputs, scalars, kRanks, 8};
  ASSERT_TRUE(device_->reduceAsync(stream_, work).isOk());
  ASSERT_EQ(runtime_.state().launches.size(), 2u);
  EXPECT_EQ(runtime_.state().launches[0].out[0], spare.data());
  EXPECT_EQ(data[17][0], 36.0f);
  EXPECT_EQ(spare[0], 36.0f);
}

TEST_F(HipReduceTest, NarrowFloatsTakeAtMostSixteenInputs) {
  std::vector<std::vector<uint16_t>> data(17, std::vector<uint16_t>(4));
  std::vector<const void*> inputs;
  for (auto& d : data) inputs.push_back(d.data());
  std::vector<uint16_t> out(4);
  void* outputs[] = {out.data()};
  ReduceWork work{static_cast<Dtype>(k::kDtypeFloat16), kSum, inputs, outputs, {}, 17, 4};
  EXPECT_EQ(device_->reduceAsync(stream_, work).code(), Code::InvalidArgument);
  EXPECT_TRUE(runtime_.state().launches.empty());
}

TEST_F(HipReduceTest, OutputsBeyondSixteenGetCopiesOfTheFirst) {
  std::vector<int64_t> a(32, 5), b(32, 6);
  const void* inputs[] = {a.data(), b.data()};
  std::vector<std::vector<int64_t>> outs(18, std::vector<int64_t>(32));
  std::vector<void*> outputs;
  for (auto& o : outs) outputs.push_back(o.data());
  ReduceWork work{static_cast<Dtype>(k::kDtypeInt64), kSum, inputs, outputs, {}, 2, 32};
  ASSERT_TRUE(device_->reduceAsync(stream_, work).isOk());
  EXPECT_EQ(runtime_.state().launches.size(), 1u);
  EXPECT_EQ(runtime_.state().launches[0].nOut, k::kMaxKernelOutputs);
  EXPECT_EQ(runtime_.state().copies, 2);
  for (auto& o : outs) EXPECT_EQ(o[31], 11);
}

// 256 threads a block; enough blocks for the count, at most 8 per compute unit (the grid-stride
// loop covers the rest).
TEST_F(HipDeviceTest, GridCoversTheCountUpToEightBlocksPerComputeUnit) {
  runtime_.state().multiprocessors = 2;
  auto device = open(kSomeImage);
  ASSERT_NE(device, nullptr);
  StreamId stream = device->createStream().value();
  for (size_t count : {size_t{100}, size_t{256} * 5, size_t{256} * 100}) {
    std::vector<int8_t> a(count, 1), out(count);
    const void* inputs[] = {a.data()};
    void* outputs[] = {out.data()};
    ASSERT_TRUE(
        device
            ->reduceAsync(stream,
                          {static_cast<Dtype>(k::kDtypeInt8), kSum, inputs, outputs, {}, 1, count})
            .isOk());
    EXPECT_EQ(runtime_.state().launchThreads.back(), 256u);
    unsigned expected = count == 100 ? 1u : count == 256 * 5 ? 5u : 16u;
    EXPECT_EQ(runtime_.state().launchBlocks.back(), expected) << count << " elements";
    EXPECT_EQ(out[count - 1], 1);
  }
}

TEST_F(HipReduceTest, MalformedWorkIsRefusedBeforeAnyLaunch) {
  std::vector<int32_t> a(4), out(4);
  const void* inputs[] = {a.data()};
  const void* nullInput[] = {nullptr};
  void* outputs[] = {out.data()};
  uint64_t oneScalar[] = {1};
  EXPECT_EQ(
      device_
          ->reduceAsync(stream_, {static_cast<Dtype>(k::kDtypeInt32), kSum, {}, outputs, {}, 1, 4})
          .code(),
      Code::InvalidArgument);
  EXPECT_EQ(
      device_
          ->reduceAsync(stream_,
                        {static_cast<Dtype>(k::kDtypeInt32), kSum, nullInput, outputs, {}, 1, 4})
          .code(),
      Code::InvalidArgument);
  EXPECT_EQ(device_
                ->reduceAsync(stream_,
                              {static_cast<Dtype>(k::kDtypeInt32), kSum, inputs, outputs, {}, 0, 4})
                .code(),
            Code::InvalidArgument);
  EXPECT_EQ(
      device_
          ->reduceAsync(stream_,
                        {static_cast<Dtype>(k::kDtypeInt32), kPreMulSum, inputs, outputs, {}, 1, 4})
          .code(),
      Code::InvalidArgument);
  const void* two[] = {a.data(), a.data()};
  EXPECT_EQ(device_
                ->reduceAsync(stream_, {static_cast<Dtype>(k::kDtypeInt32), kSum, two, outputs,
                                        oneScalar, 2, 4})
                .code(),
            Code::InvalidArgument);
  EXPECT_EQ(
      device_
          ->reduceAsync(99, {static_cast<Dtype>(k::kDtypeInt32), kSum, inputs, outputs, {}, 1, 4})
          .code(),
      Code::NotFound);
  EXPECT_TRUE(runtime_.state().launches.empty());
}

}  // namespace
}  // namespace hc::device
