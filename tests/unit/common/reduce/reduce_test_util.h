// Helpers of the reduce tests: dtype and operator codes written out independently of the library,
// guarded buffers, seeded data whose reductions are exact, and the reference reduction of the
// integer, fp32 and fp64 dtypes (reduce_narrow_reference.h has the fp16, bf16 and fp8 ones).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

namespace hc::coll::testing {

static_assert(std::endian::native == std::endian::little, "scalar encoding assumes little-endian");

// ncclDataType_t and RedOp values (common/vocabulary.h), spelled out here on purpose.
enum : uint8_t {
  kInt8 = 0,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBfloat16,
  kFp8e4m3,
  kFp8e5m2
};
enum : uint8_t { kSum = 0, kProd, kMax, kMin, kAvg, kPreMulSum };
inline const uint8_t kSupported[] = {kInt8,    kUint8,   kInt32,   kUint32,   kInt64,   kUint64,
                                     kFloat16, kFloat32, kFloat64, kBfloat16, kFp8e4m3, kFp8e5m2};
inline const uint8_t kNarrowFloats[] = {kFloat16, kBfloat16, kFp8e4m3, kFp8e5m2};
inline constexpr size_t kElementBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};  // by dtype
inline const uint8_t kOps[] = {kSum, kProd, kMax, kMin, kAvg, kPreMulSum};

// A buffer of `count` elements between two guard zones that must never change.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 64;
  static constexpr uint8_t kGuardByte = 0xA5;

  GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuardBytes, kGuardByte) {}
  uint8_t* data() { return storage_.data() + kGuardBytes; }
  bool guardsIntact() const {
    auto intact = [](auto first, auto last) {
      return std::all_of(first, last, [](uint8_t b) { return b == kGuardByte; });
    };
    return intact(storage_.begin(), storage_.begin() + kGuardBytes) &&
           intact(storage_.end() - kGuardBytes, storage_.end());
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

// Integers: the full range, so sums and products wrap. Floats: small integers (products of at
// most four factors of |x| <= 4), so every result is exact whatever the order.
template <typename T>
T randomValue(std::mt19937_64& rng, uint8_t op) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(rng());
  } else {
    const int limit = op == kProd ? 4 : 64;
    return static_cast<T>(static_cast<int>(rng() % (2 * limit + 1)) - limit);
  }
}

// PreMulSum scalars: any integer, or a quarter-integer float (x * s stays exact).
template <typename T>
T randomScalar(std::mt19937_64& rng) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(rng());
  } else {
    return static_cast<T>(static_cast<int>(rng() % 33) - 16) / static_cast<T>(4);
  }
}

template <typename T>
uint64_t scalarBits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

// Integer arithmetic modulo 2^64, then truncated to T: the same residue as wrapping in T.
template <typename T>
uint64_t widen(T x) {
  if constexpr (std::is_signed_v<T>) return static_cast<uint64_t>(static_cast<int64_t>(x));
  return static_cast<uint64_t>(x);
}

// The expected result of element j, reading column j of every rank one at a time.
template <typename T>
T referenceElement(const std::vector<std::vector<T>>& in, size_t j, uint8_t op,
                   const std::vector<T>& scalars) {
  const size_t n = in.size();
  std::vector<T> col(n);
  for (size_t r = 0; r < n; ++r) col[r] = in[r][j];
  switch (op) {
    case kMax:
      return *std::max_element(col.begin(), col.end());
    case kMin:
      return *std::min_element(col.begin(), col.end());
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    uint64_t acc = 0;
    if (op == kSum || op == kAvg) {
      acc = std::accumulate(col.begin(), col.end(), uint64_t{0},
                            [](uint64_t a, T x) { return a + widen(x); });
    } else if (op == kProd) {
      acc = std::accumulate(col.begin(), col.end(), uint64_t{1},
                            [](uint64_t a, T x) { return a * widen(x); });
    } else {
      for (size_t r = 0; r < n; ++r) acc += widen(scalars[r]) * widen(col[r]);
    }
    const T wrapped = static_cast<T>(acc);
    if (op != kAvg) return wrapped;
    if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(std::lldiv(wrapped, static_cast<long long>(n)).quot);
    } else {
      return static_cast<T>(static_cast<uint64_t>(wrapped) / n);
    }
  } else {
    // Exact in double for this data. Starting from the first term rather than from +0 keeps the
    // sign of a sum of negative zeros (premulsum: -0.25 * 0).
    double exact = 0;
    if (op == kSum || op == kAvg) {
      exact = std::accumulate(col.begin() + 1, col.end(), double(col[0]));
    } else if (op == kProd) {
      exact = std::accumulate(col.begin() + 1, col.end(), double(col[0]), std::multiplies<>());
    } else {
      exact = double(scalars[0]) * double(col[0]);
      for (size_t r = 1; r < n; ++r) exact += double(scalars[r]) * double(col[r]);
    }
    if (op != kAvg) return static_cast<T>(exact);
    return static_cast<T>(exact) * static_cast<T>(1.0 / static_cast<double>(n));
  }
}

// Elements of `got` whose bits differ from `want`.
template <typename T>
size_t countWrong(const T* got, const std::vector<T>& want) {
  size_t wrong = 0;
  for (size_t j = 0; j < want.size(); ++j) wrong += std::memcmp(&got[j], &want[j], sizeof(T)) != 0;
  return wrong;
}

// One reduction's data as bytes, whatever the dtype: every rank's input, the PreMulSum scalars
// (one per rank, in the dtype's bits) and the expected result.
struct CaseData {
  size_t elementBytes = 0;
  size_t count = 0;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<uint64_t> scalars;
  std::vector<uint8_t> want;
};

// Elements of got[0, count) whose bytes differ from the expected ones.
inline size_t countWrongElements(const uint8_t* got, const CaseData& c) {
  size_t wrong = 0;
  for (size_t j = 0; j < c.count; ++j) {
    const size_t at = j * c.elementBytes;
    wrong += std::memcmp(got + at, c.want.data() + at, c.elementBytes) != 0;
  }
  return wrong;
}

template <typename T>
std::vector<uint8_t> asBytes(const std::vector<T>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

template <typename T>
CaseData makeWideCase(uint8_t op, size_t nInputs, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<T>> data(nInputs, std::vector<T>(count));
  for (auto& rank : data) {
    for (auto& x : rank) x = randomValue<T>(rng, op);
  }
  std::vector<T> scalarValues(nInputs);
  CaseData c;
  c.elementBytes = sizeof(T);
  c.count = count;
  for (size_t i = 0; i < nInputs; ++i) {
    scalarValues[i] = randomScalar<T>(rng);
    c.scalars.push_back(scalarBits(scalarValues[i]));
  }
  std::vector<T> want(count);
  for (size_t j = 0; j < count; ++j) want[j] = referenceElement(data, j, op, scalarValues);
  for (const auto& rank : data) c.inputs.push_back(asBytes(rank));
  c.want = asBytes(want);
  return c;
}

}  // namespace hc::coll::testing
