// What reduceRange does not cover by itself: splitting one reduction into ranges (as the executor
// does over the pool), and copyRange.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>

#include "common/reduce/reduce.h"
#include "tests/unit/common/reduce/reduce_cases.h"

namespace hc::coll {
namespace {

using namespace hc::coll::testing;  // NOLINT: test helpers

// Splitting [0, count) at arbitrary points (inside chunks, at element granularity) gives the
// same bits as one call: results do not depend on how the executor cuts the work.
void expectSplitsMatchOneCall(uint8_t dtype, uint8_t op, size_t nInputs, bool inPlace) {
  SCOPED_TRACE(std::string(dtypeName(Dtype{dtype})) + " " + redOpName(RedOp{op}) +
               (inPlace ? " in place" : ""));
  const size_t count = 100003;
  const CaseData c = makeCase(dtype, op, nInputs, count, dtype * 31 + op);
  const size_t bytes = count * c.elementBytes;
  std::mt19937_64 rng(dtype * 31 + op);

  auto run = [&](const std::vector<size_t>& cuts) {
    std::vector<std::vector<uint8_t>> bufs = c.inputs;
    std::vector<uint8_t> separate(bytes);
    std::vector<const void*> inputs;
    for (auto& b : bufs) inputs.push_back(b.data());
    std::vector<void*> outputs{inPlace ? static_cast<void*>(bufs[0].data()) : separate.data()};
    ReduceSpec spec{Dtype{dtype},
                    RedOp{op},
                    inputs.data(),
                    nInputs,
                    outputs.data(),
                    1,
                    op == kPreMulSum ? c.scalars.data() : nullptr,
                    nInputs};
    for (size_t i = 0; i + 1 < cuts.size(); ++i) reduceRange(spec, cuts[i], cuts[i + 1]);
    return inPlace ? bufs[0] : separate;
  };
  const std::vector<uint8_t> whole = run({0, count});
  EXPECT_EQ(countWrongElements(whole.data(), c), 0u);
  std::vector<size_t> cuts{0, 1, 4097, 4098, count / 2 + 3};
  for (int i = 0; i < 20; ++i) cuts.push_back(rng() % count);
  cuts.push_back(count);
  std::sort(cuts.begin(), cuts.end());
  EXPECT_TRUE(run(cuts) == whole);
}

TEST(ReduceSplitTest, RangesEqualOneCall) {
  expectSplitsMatchOneCall(kFloat32, kSum, 3, false);
  expectSplitsMatchOneCall(kFloat32, kSum, 2, true);
  expectSplitsMatchOneCall(kFloat64, kPreMulSum, 9, false);
  expectSplitsMatchOneCall(kInt8, kAvg, 5, true);
  expectSplitsMatchOneCall(kUint32, kProd, 4, false);
  expectSplitsMatchOneCall(kInt64, kMin, 3, false);
  expectSplitsMatchOneCall(kFloat16, kAvg, 3, false);
  expectSplitsMatchOneCall(kBfloat16, kPreMulSum, 4, true);
  expectSplitsMatchOneCall(kFp8e4m3, kSum, 4, false);
  expectSplitsMatchOneCall(kFp8e5m2, kMax, 2, true);
}

TEST(ReduceSplitTest, EmptyRangeTouchesNothing) {
  GuardedBuffer in(16), out(16);
  std::memset(out.data(), 0x77, 16);
  const void* inputs[] = {in.data()};
  void* outputs[] = {out.data()};
  ReduceSpec spec{Dtype{kFloat32}, RedOp{kSum}, inputs, 1, outputs, 1, nullptr, 1};
  reduceRange(spec, 2, 2);
  reduceRange(spec, 3, 1);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out.data()[i], 0x77);
}

// Copies to 1 and 3 destinations (the chunked path), with src among the outputs, over pieces.
TEST(CopyRangeTest, CopiesEveryPieceToEveryOutputButSrc) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, (size_t{1} << 20) + 3}) {
    for (size_t nOut : {1, 3}) {
      SCOPED_TRACE(std::to_string(bytes) + " bytes to " + std::to_string(nOut));
      std::mt19937_64 rng(bytes + nOut);
      GuardedBuffer src(bytes);
      for (size_t i = 0; i < bytes; ++i) src.data()[i] = static_cast<uint8_t>(rng());
      std::vector<uint8_t> original(src.data(), src.data() + bytes);
      std::vector<std::unique_ptr<GuardedBuffer>> outs;
      std::vector<void*> outputs;
      for (size_t o = 0; o < nOut; ++o) {
        outs.push_back(std::make_unique<GuardedBuffer>(bytes));
        std::memset(outs.back()->data(), 0, bytes);
        outputs.push_back(outs.back()->data());
      }
      outputs.insert(outputs.begin() + outputs.size() / 2, src.data());
      const size_t mid = bytes / 3;
      copyRange(src.data(), outputs.data(), outputs.size(), 0, mid);
      copyRange(src.data(), outputs.data(), outputs.size(), mid, bytes);
      for (auto& o : outs) {
        EXPECT_TRUE(std::equal(original.begin(), original.end(), o->data()));
        EXPECT_TRUE(o->guardsIntact());
      }
      EXPECT_TRUE(std::equal(original.begin(), original.end(), src.data()));
      EXPECT_TRUE(src.guardsIntact());
    }
  }
}

}  // namespace
}  // namespace hc::coll
