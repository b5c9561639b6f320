#include "tests/unit/daemon/coll/net/net_test_values.h"

#include <algorithm>
#include <bit>

#include "common/numerics/narrow_float_reference.h"

namespace hc::coll::net::testing {
namespace {

static_assert(std::endian::native == std::endian::little, "encodings assume little-endian");

template <typename T>
void put(std::vector<uint8_t>& out, size_t i, T value) {
  std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
}

// float -> bfloat16, round to nearest even (no NaN in this data).
uint16_t toBfloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
// float -> float16 by the checkers' reference codec: clang 14 (the sanitizer builds) has no
// _Float16 on x86-64.
uint16_t toFloat16(float value) {
  return static_cast<uint16_t>(
      numerics::reference::encodeMiniFloat(numerics::reference::kHalfFormat, value));
}

// One float result in dtype. Values reach here exact, except Avg's, which arrive as the fp32
// product for the narrow types: rounding it once more to 16 bits is what the kernels do.
void putFloat(std::vector<uint8_t>& out, size_t i, uint8_t dtype, double exact, float narrow) {
  switch (dtype) {
    case kFloat64:
      return put(out, i, exact);
    case kFloat32:
      return put(out, i, static_cast<float>(exact));
    case kFloat16:
      return put(out, i, toFloat16(narrow));
    case kBfloat16:
      return put(out, i, toBfloat16(narrow));
  }
  ADD_FAILURE() << "no float encoding for dtype " << int(dtype);
}

}  // namespace

std::string dtypeLabel(uint8_t dtype) {
  switch (dtype) {
    case kInt8:
      return "int8";
    case kInt64:
      return "int64";
    case kFloat16:
      return "float16";
    case kFloat32:
      return "float32";
    case kFloat64:
      return "float64";
    case kBfloat16:
      return "bfloat16";
  }
  return "dtype" + std::to_string(dtype);
}

std::string opLabel(uint8_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return op < 6 ? kNames[op] : "op" + std::to_string(op);
}

Contribution randomValues(uint8_t dtype, uint8_t op, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Contribution values(count);
  const int64_t limit = op == kProd ? 2 : 8;
  for (int64_t& v : values) {
    if (dtype == kInt64) {
      v = static_cast<int64_t>(rng());
    } else if (dtype == kInt8) {
      v = static_cast<int8_t>(rng());
    } else {
      v = static_cast<int64_t>(rng() % (2 * limit + 1)) - limit;
    }
  }
  return values;
}

std::vector<uint8_t> encode(uint8_t dtype, const Contribution& values) {
  std::vector<uint8_t> out(values.size() * sizeOf(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == kInt64) {
      put(out, i, values[i]);
    } else if (dtype == kInt8) {
      put(out, i, static_cast<int8_t>(values[i]));
    } else {
      putFloat(out, i, dtype, static_cast<double>(values[i]), static_cast<float>(values[i]));
    }
  }
  return out;
}

std::vector<uint8_t> reference(uint8_t dtype, uint8_t op, const std::vector<Contribution>& nodes,
                               uint64_t divisor) {
  const size_t count = nodes.empty() ? 0 : nodes[0].size();
  std::vector<uint8_t> out(count * sizeOf(dtype));
  for (size_t j = 0; j < count; ++j) {
    if (isInteger(dtype)) {
      // Modulo 2^64, then truncated to the dtype: the same residue as wrapping in it.
      uint64_t acc = op == kProd ? 1 : 0;
      int64_t best = nodes[0][j];
      for (const Contribution& node : nodes) {
        const uint64_t x = static_cast<uint64_t>(node[j]);
        acc = op == kProd ? acc * x : acc + x;
        best = op == kMax ? std::max(best, node[j]) : std::min(best, node[j]);
      }
      int64_t result = op == kMax || op == kMin ? best : static_cast<int64_t>(acc);
      if (dtype == kInt8) result = static_cast<int8_t>(result);
      if (op == kAvg) result /= static_cast<int64_t>(divisor);  // truncates, as C++ does
      if (dtype == kInt64) {
        put(out, j, result);
      } else {
        put(out, j, static_cast<int8_t>(result));
      }
      continue;
    }
    // Floats: exact in double for this data (a product's zero keeps the sign of its factors).
    double exact = static_cast<double>(nodes[0][j]);
    for (size_t i = 1; i < nodes.size(); ++i) {
      const double x = static_cast<double>(nodes[i][j]);
      if (op == kProd) {
        exact *= x;
      } else if (op == kMax) {
        exact = std::max(exact, x);
      } else if (op == kMin) {
        exact = std::min(exact, x);
      } else {
        exact += x;
      }
    }
    if (op == kAvg) {
      // Sum, then one multiplication by the dtype's 1/divisor (fp32 for the narrow types).
      const float narrow =
          static_cast<float>(exact) * static_cast<float>(1.0 / static_cast<double>(divisor));
      const double wide = dtype == kFloat64 ? exact * (1.0 / static_cast<double>(divisor)) : narrow;
      putFloat(out, j, dtype, wide, narrow);
    } else {
      putFloat(out, j, dtype, exact, static_cast<float>(exact));
    }
  }
  return out;
}

bool Guarded::guardsIntact() const {
  auto intact = [](auto first, auto last) {
    return std::all_of(first, last, [](uint8_t b) { return b == kGuardByte; });
  };
  return intact(storage_.begin(), storage_.begin() + kGuard) &&
         intact(storage_.end() - kGuard, storage_.end());
}

size_t Guarded::wrongElements(const std::vector<uint8_t>& want, size_t at,
                              size_t elementBytes) const {
  size_t wrong = 0;
  for (size_t i = 0; i + elementBytes <= want.size(); i += elementBytes) {
    wrong += std::memcmp(data() + at + i, want.data() + i, elementBytes) != 0;
  }
  return wrong;
}

}  // namespace hc::coll::net::testing
