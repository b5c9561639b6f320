// Test data for the NetOp tests: dtype and operator codes written out independently of the
// library, seeded inputs whose reductions are exact in any order (small integers for floats,
// the full range for int64, where wrapping is exact), the reference reduction, and encoders to
// the dtypes' bytes that do not use the library (float16 by common/numerics' reference codec;
// bfloat16 rounded by hand).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace hc::coll::net::testing {

// ncclDataType_t and RedOp values (common/vocabulary.h), spelled out here on purpose.
enum : uint8_t { kInt8 = 0, kInt64 = 4, kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9 };
enum : uint8_t { kSum = 0, kProd, kMax, kMin, kAvg, kPreMulSum };
inline const uint8_t kAllOps[] = {kSum, kProd, kMax, kMin, kAvg, kPreMulSum};

inline size_t sizeOf(uint8_t dtype) {
  switch (dtype) {
    case kInt8:
      return 1;
    case kFloat16:
    case kBfloat16:
      return 2;
    case kFloat32:
      return 4;
    default:
      return 8;
  }
}
inline bool isInteger(uint8_t dtype) { return dtype == kInt8 || dtype == kInt64; }
std::string dtypeLabel(uint8_t dtype);
std::string opLabel(uint8_t op);

// A node's contribution, as exact values: integers for every dtype (floats hold small ones).
using Contribution = std::vector<int64_t>;

// Seeded inputs for `node`: int64 over its full range; floats small enough that every partial
// sum (|x| <= 8, 8 nodes) and product (|x| <= 2) is exact even in bfloat16.
Contribution randomValues(uint8_t dtype, uint8_t op, size_t count, uint64_t seed);

// Bytes of the values in dtype.
std::vector<uint8_t> encode(uint8_t dtype, const Contribution& values);

// The expected bytes of reducing element j of every node's values with `op` (Avg: divided by
// divisor as reduce.h specifies; PreMulSum: a plain sum, as between nodes).
std::vector<uint8_t> reference(uint8_t dtype, uint8_t op, const std::vector<Contribution>& nodes,
                               uint64_t divisor);

// A byte buffer with guard zones on both sides that must never change.
class Guarded {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint8_t kGuardByte = 0xA5;
  static constexpr uint8_t kFill = 0xEE;  // what the buffer holds before anything is assigned
  explicit Guarded(size_t bytes, uint8_t fill = kFill)
      : bytes_(bytes), storage_(bytes + 2 * kGuard, kGuardByte) {
    std::fill(storage_.begin() + kGuard, storage_.end() - kGuard, fill);
  }
  uint8_t* data() { return storage_.data() + kGuard; }
  const uint8_t* data() const { return storage_.data() + kGuard; }
  size_t size() const { return bytes_; }
  void assign(const std::vector<uint8_t>& bytes, size_t at = 0) {
    if (!bytes.empty()) std::memcpy(data() + at, bytes.data(), bytes.size());
  }
  bool guardsIntact() const;
  // Bytes [at, at + want.size()) differ from want in this many elements of elementBytes.
  size_t wrongElements(const std::vector<uint8_t>& want, size_t at, size_t elementBytes) const;

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

}  // namespace hc::coll::net::testing
