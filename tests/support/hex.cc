#include "tests/support/hex.h"

#include <cstdint>

namespace hc::test {
namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool parseHex(std::string_view hex, void* out, size_t size) {
  if (hex.size() != 2 * size) return false;
  // Every digit is checked before the first byte is written: out changes only on success.
  for (char c : hex) {
    if (nibble(c) < 0) return false;
  }
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return true;
}

std::string toHex(const void* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

bool parseHexId(std::string_view hex, hc_unique_id_t* id) {
  return parseHex(hex, id->internal, sizeof(id->internal));
}

std::string toHex(const hc_unique_id_t& id) { return toHex(id.internal, sizeof(id.internal)); }

}  // namespace hc::test
