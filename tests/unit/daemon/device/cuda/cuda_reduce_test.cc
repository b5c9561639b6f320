// CudaDevice::reduceAsync() through the whole launch path, on the fake driver: the ReduceArgs
// block handed to cuLaunchKernel, the grid, reductions over more inputs than one launch takes
// (a partial result carried between launches) and more outputs than one launch writes. The fake
// runs the kernels' host build over the grid it is given, and the results are compared with the
// host reduction coll::reduceRange() for every dtype and operator. This checks the backend's
// launch logic, not a GPU: nothing here runs on one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/reduce/reduce.h"
#include "tests/unit/daemon/device/cuda/cuda_test_util.h"
#include "tests/unit/daemon/device/cuda/reduce_test_values.h"

namespace hc::device {
namespace {

using kernels::testing::isNan;
using kernels::testing::kElementBytes;
using kernels::testing::randomElement;
using kernels::testing::scalarSlot;
using kernels::testing::storeElement;
using testing::FakeDriverConfig;
using ::testing::HasSubstr;
using testing::openFakeDevice;

bool isNarrowFloat(uint32_t dtype) {
  return dtype == 6 || dtype == 9 || dtype == 10 || dtype == 11;
}

struct Shape {
  size_t nIn;
  size_t nOut;
  bool inPlace;  // output i is input i, for every output
  int launches;  // kernels the reduction takes
};

std::string shapeName(const Shape& shape) {
  return "in" + std::to_string(shape.nIn) + "_out" + std::to_string(shape.nOut) +
         (shape.inPlace ? "_inplace" : "");
}
void PrintTo(const Shape& shape, std::ostream* out) { *out << shapeName(shape); }

class CudaReduceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.ok()) << "cannot inspect the fake driver at " << HC_FAKE_CUDA_PATH;
    device_ = openFakeDevice();
    ASSERT_NE(device_, nullptr);
    Result<StreamId> stream = device_->createStream();
    ASSERT_TRUE(stream.isOk()) << stream.status().toString();
    stream_ = *stream;
  }
  void TearDown() override {
    if (device_ != nullptr) {
      EXPECT_TRUE(device_->destroyStream(stream_).isOk());
    }
    EXPECT_EQ(fake_.contextDepth(), 0);
  }

  FakeDriverConfig config_;
  fake_cuda::Inspector fake_;
  std::unique_ptr<CudaDevice> device_;
  StreamId stream_ = 0;
};

class CudaReduceTest : public CudaReduceFixture, public ::testing::WithParamInterface<Shape> {};

// Returns the number of mismatching elements over every output.
size_t reduceAndCompare(CudaDevice& device, StreamId stream, uint32_t dtype, uint32_t redop,
                        const Shape& shape, size_t count, uint64_t seed, Status* status) {
  std::mt19937_64 rng(seed);
  const size_t bytes = count * kElementBytes[dtype];
  std::vector<std::vector<uint8_t>> inputs(shape.nIn, std::vector<uint8_t>(bytes));
  for (auto& in : inputs) {
    for (size_t i = 0; i < count; ++i) storeElement(in, dtype, i, randomElement(rng, dtype));
  }
  std::vector<uint64_t> scalars(shape.nIn);
  for (auto& s : scalars) s = scalarSlot(dtype, randomElement(rng, dtype));

  // The reference, on its own copies.
  std::vector<std::vector<uint8_t>> refInputs = inputs;
  std::vector<std::vector<uint8_t>> refOutputs(shape.nOut, std::vector<uint8_t>(bytes));
  std::vector<const void*> refIn;
  for (auto& in : refInputs) refIn.push_back(in.data());
  std::vector<void*> refOut;
  for (size_t o = 0; o < shape.nOut; ++o) {
    refOut.push_back(shape.inPlace ? refInputs[o].data() : refOutputs[o].data());
  }
  const coll::ReduceSpec spec{Dtype{static_cast<uint8_t>(dtype)},
                              RedOp{static_cast<uint8_t>(redop)},
                              refIn.data(),
                              refIn.size(),
                              refOut.data(),
                              refOut.size(),
                              scalars.data(),
                              shape.nIn};
  coll::reduceRange(spec, 0, count);

  std::vector<std::vector<uint8_t>> outputs(shape.nOut, std::vector<uint8_t>(bytes, 0xEE));
  std::vector<const void*> in;
  for (auto& buffer : inputs) in.push_back(buffer.data());
  std::vector<void*> out;
  for (size_t o = 0; o < shape.nOut; ++o) {
    out.push_back(shape.inPlace ? inputs[o].data() : outputs[o].data());
  }
  ReduceWork work;
  work.dtype = Dtype{static_cast<uint8_t>(dtype)};
  work.redop = RedOp{static_cast<uint8_t>(redop)};
  work.inputs = in;
  work.outputs = out;
  if (redop == kernels::kRedopPreMulSum) work.scalars = scalars;
  work.nRanks = shape.nIn;
  work.count = count;
  *status = device.reduceAsync(stream, work);
  if (!status->isOk()) return 0;
  *status = device.synchronize(stream);

  size_t mismatches = 0;
  const size_t size = kElementBytes[dtype];
  for (size_t o = 0; o < shape.nOut; ++o) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t want = 0, got = 0;
      std::memcpy(&want, static_cast<const uint8_t*>(refOut[o]) + i * size, size);
      std::memcpy(&got, static_cast<const uint8_t*>(out[o]) + i * size, size);
      mismatches += want != got && !(isNan(dtype, want) && isNan(dtype, got));
    }
  }
  return mismatches;
}

TEST_P(CudaReduceTest, MatchesHostReductionForEveryDtypeAndOperator) {
  const Shape shape = GetParam();
  uint64_t seed = 7;
  for (uint32_t dtype = 0; dtype < kernels::kNumKernelDtypes; ++dtype) {
    // Narrow floats never chain launches (their partial would round): refused, tested below.
    if (shape.nIn > kernels::kMaxKernelInputs && isNarrowFloat(dtype)) continue;
    for (uint32_t redop = 0; redop < kernels::kNumKernelRedops; ++redop) {
      // More elements than the fake's grid has threads (2 multiprocessors x 8 blocks x 256), so
      // threads take several elements each.
      const int launchesBefore = fake_.launches();
      Status status;
      const size_t bad =
          reduceAndCompare(*device_, stream_, dtype, redop, shape, 5000, seed++, &status);
      ASSERT_TRUE(status.isOk()) << status.toString();
      EXPECT_EQ(bad, 0u) << kernels::testing::kDtypeNames[dtype] << " "
                         << kernels::testing::kRedopNames[redop];
      EXPECT_EQ(fake_.launches() - launchesBefore, shape.launches);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaReduceTest,
    ::testing::Values(Shape{1, 1, false, 1}, Shape{3, 2, false, 1}, Shape{16, 16, true, 1},
                      // More outputs than a launch writes: copies of the first.
                      Shape{4, 20, false, 1},
                      // More inputs than a launch reads: a partial result carried over.
                      Shape{20, 1, false, 2}, Shape{33, 33, true, 3}),
    [](const ::testing::TestParamInfo<Shape>& info) { return shapeName(info.param); });

TEST_F(CudaReduceFixture, RefusesNarrowFloatsBeyondOneLaunch) {
  std::vector<uint16_t> buffers(17, 0x3C00);
  std::vector<const void*> in;
  for (auto& b : buffers) in.push_back(&b);
  uint16_t result = 0;
  void* out[] = {&result};
  ReduceWork work;
  work.dtype = Dtype{kernels::kDtypeFloat16};
  work.redop = RedOp{kernels::kRedopSum};
  work.inputs = in;
  work.outputs = out;
  work.nRanks = in.size();
  work.count = 1;
  Status status = device_->reduceAsync(stream_, work);
  EXPECT_EQ(status.code(), Code::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("at most 16"));
}

TEST_F(CudaReduceFixture, RefusesMalformedWork) {
  float a = 1.0f, b = 0.0f;
  const void* in[] = {&a};
  void* out[] = {&b};
  ReduceWork work;
  work.dtype = Dtype{kernels::kDtypeFloat32};
  work.redop = RedOp{kernels::kRedopSum};
  work.inputs = in;
  work.outputs = out;
  work.nRanks = 1;
  work.count = 1;
  ReduceWork noRanks = work;
  noRanks.nRanks = 0;
  EXPECT_EQ(device_->reduceAsync(stream_, noRanks).code(), Code::InvalidArgument);
  ReduceWork preMulWithoutScalars = work;
  preMulWithoutScalars.redop = RedOp{kernels::kRedopPreMulSum};
  EXPECT_EQ(device_->reduceAsync(stream_, preMulWithoutScalars).code(), Code::InvalidArgument);
  EXPECT_EQ(device_->reduceAsync(stream_ + 1, work).code(), Code::NotFound);
  ReduceWork nothing = work;
  nothing.count = 0;
  const int launchesBefore = fake_.launches();
  EXPECT_TRUE(device_->reduceAsync(stream_, nothing).isOk());
  EXPECT_EQ(fake_.launches(), launchesBefore);
}

}  // namespace
}  // namespace hc::device
