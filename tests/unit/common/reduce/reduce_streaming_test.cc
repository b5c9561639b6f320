// The streaming (non-temporal) store path: streamBytes at every alignment, and reductions and
// copies large enough to stream, at buffer offsets that are not 16-byte aligned and over ranges
// that start and end inside a chunk, give the same bytes as the in-place (regular store) path and
// the reference, and write nothing outside their range.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>

#include "common/reduce/chunk_writer.h"
#include "common/reduce/reduce.h"
#include "tests/unit/common/reduce/reduce_cases.h"

namespace hc::coll {
namespace {

using namespace hc::coll::testing;  // NOLINT: test helpers

TEST(StreamBytesTest, CopiesExactlyAtEveryAlignmentAndLength) {
  std::mt19937_64 rng(7);
  for (size_t bytes : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 200, 4099}) {
    for (size_t dstOffset = 0; dstOffset < 16; ++dstOffset) {
      for (size_t srcOffset : {0, 1, 8, 13}) {
        SCOPED_TRACE(std::to_string(bytes) + " bytes, dst +" + std::to_string(dstOffset) +
                     ", src +" + std::to_string(srcOffset));
        GuardedBuffer src(bytes + 16), dst(bytes + 16);
        for (size_t i = 0; i < bytes + 16; ++i) src.data()[i] = static_cast<uint8_t>(rng());
        std::memset(dst.data(), 0x11, bytes + 16);
        streamBytes(dst.data() + dstOffset, src.data() + srcOffset, bytes);
        fenceStreamingStores();
        for (size_t i = 0; i < bytes + 16; ++i) {
          const bool inside = i >= dstOffset && i < dstOffset + bytes;
          const uint8_t want = inside ? src.data()[i - dstOffset + srcOffset] : 0x11;
          ASSERT_EQ(dst.data()[i], want) << "byte " << i;
        }
        EXPECT_TRUE(dst.guardsIntact());
      }
    }
  }
}

// Buffers of one case, each `offset` bytes past a 64-byte boundary.
struct OffsetBuffers {
  OffsetBuffers(size_t n, size_t bytes, size_t offset) {
    for (size_t i = 0; i < n; ++i) {
      storage.push_back(std::make_unique<GuardedBuffer>(bytes + offset));
      ptrs.push_back(storage.back()->data() + offset);
    }
  }
  bool guardsIntact() const {
    for (const auto& b : storage) {
      if (!b->guardsIntact()) return false;
    }
    return true;
  }
  std::vector<std::unique_ptr<GuardedBuffer>> storage;
  std::vector<uint8_t*> ptrs;
};

// Reduces elements [begin, end) out of place (separate outputs, streamed when large) and in place
// (every input is an output, regular stores); both must give the reference inside the range and
// leave everything outside it as it was.
void expectOutOfPlaceEqualsInPlace(uint8_t dtype, uint8_t op, size_t nInputs, size_t count,
                                   size_t begin, size_t end) {
  const CaseData c = makeCase(dtype, op, nInputs, count, dtype * 7919u + op * 31u + count);
  const size_t esize = c.elementBytes;
  const size_t bytes = count * esize;
  // Element-aligned but not 16-byte-aligned, and different for inputs and outputs.
  const size_t inOffset = (3 * esize) % 16;
  const size_t outOffset = (5 * esize) % 16;
  OffsetBuffers in(nInputs, bytes, inOffset), inPlace(nInputs, bytes, inOffset);
  OffsetBuffers out(nInputs, bytes, outOffset);
  for (size_t i = 0; i < nInputs; ++i) {
    if (bytes == 0) continue;
    std::memcpy(in.ptrs[i], c.inputs[i].data(), bytes);
    std::memcpy(inPlace.ptrs[i], c.inputs[i].data(), bytes);
    std::memset(out.ptrs[i], 0x5c, bytes);
  }
  auto reduce = [&](OffsetBuffers& inputs, OffsetBuffers& outputs) {
    std::vector<const void*> ins(inputs.ptrs.begin(), inputs.ptrs.end());
    std::vector<void*> outs(outputs.ptrs.begin(), outputs.ptrs.end());
    ReduceSpec spec{Dtype{dtype},
                    RedOp{op},
                    ins.data(),
                    nInputs,
                    outs.data(),
                    outs.size(),
                    op == kPreMulSum ? c.scalars.data() : nullptr,
                    nInputs};
    reduceRange(spec, begin, end);
  };
  reduce(in, out);
  reduce(inPlace, inPlace);

  size_t wrong = 0, differ = 0, touched = 0;
  for (size_t i = 0; i < nInputs; ++i) {
    for (size_t j = 0; j < count; ++j) {
      const uint8_t* o = out.ptrs[i] + j * esize;
      const uint8_t* p = inPlace.ptrs[i] + j * esize;
      if (j >= begin && j < end) {
        wrong += std::memcmp(o, c.want.data() + j * esize, esize) != 0;
        differ += std::memcmp(o, p, esize) != 0;
      } else {
        touched += std::memcmp(p, c.inputs[i].data() + j * esize, esize) != 0;
        for (size_t b = 0; b < esize; ++b) touched += o[b] != 0x5c;
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(differ, 0u);
  EXPECT_EQ(touched, 0u);
  EXPECT_TRUE(in.guardsIntact() && inPlace.guardsIntact() && out.guardsIntact());
}

class ReduceStreamingTest : public ::testing::TestWithParam<std::tuple<uint8_t, uint8_t>> {};

TEST_P(ReduceStreamingTest, OutOfPlaceEqualsInPlaceAtUnalignedOffsets) {
  auto [dtype, op] = GetParam();
  const size_t esize = kElementBytes[dtype];
  // Odd, and large enough that the range, less a few elements at each end, streams.
  const size_t large = (2 * kStreamingMinBytes) / esize + 4097;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}, large}) {
    SCOPED_TRACE(std::string(dtypeName(Dtype{dtype})) + " " + redOpName(RedOp{op}) + " count " +
                 std::to_string(count));
    expectOutOfPlaceEqualsInPlace(dtype, op, 2, count, 0, count);
    if (count > 8) expectOutOfPlaceEqualsInPlace(dtype, op, 3, count, 3, count - 2);
  }
  ASSERT_GE((large - 5) * esize, kStreamingMinBytes);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, ReduceStreamingTest,
                         ::testing::Combine(::testing::ValuesIn(kSupported),
                                            ::testing::ValuesIn(kOps)),
                         [](const auto& info) {
                           return std::string(dtypeName(Dtype{std::get<0>(info.param)})) + "_" +
                                  redOpName(RedOp{std::get<1>(info.param)});
                         });

// Streamed copies to 1 and 3 destinations at unaligned offsets, over a range inside the buffer.
TEST(CopyRangeStreamingTest, CopiesOnlyTheRangeAtUnalignedOffsets) {
  const size_t bytes = 2 * kStreamingMinBytes + 4099;
  const size_t begin = 5, end = bytes - 3;
  for (size_t nOut : {1, 3}) {
    SCOPED_TRACE(std::to_string(nOut) + " outputs");
    std::mt19937_64 rng(nOut);
    OffsetBuffers src(1, bytes, 7), dst(nOut, bytes, 9);
    for (size_t i = 0; i < bytes; ++i) src.ptrs[0][i] = static_cast<uint8_t>(rng());
    for (uint8_t* d : dst.ptrs) std::memset(d, 0x33, bytes);
    std::vector<void*> outputs(dst.ptrs.begin(), dst.ptrs.end());
    copyRange(src.ptrs[0], outputs.data(), outputs.size(), begin, end);
    for (uint8_t* d : dst.ptrs) {
      size_t wrong = 0;
      for (size_t i = 0; i < bytes; ++i) {
        wrong += d[i] != (i >= begin && i < end ? src.ptrs[0][i] : 0x33);
      }
      EXPECT_EQ(wrong, 0u);
    }
    EXPECT_TRUE(src.guardsIntact() && dst.guardsIntact());
  }
}

}  // namespace
}  // namespace hc::coll
