#include "daemon/peer/unique_id.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace hc::peer {
namespace {

constexpr size_t kVersionOffset = 4;
constexpr size_t kKeyOffset = 8;
constexpr size_t kAddressLengthOffset = kKeyOffset + kCommKeyBytes;
static_assert(kAddressLengthOffset + 1 == kUniqueIdAddressOffset);

void putU32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t getU32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{in[i]} << (8 * i);
  return v;
}

bool isHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

bool isV6Char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
         c == '.';
}

}  // namespace

Status validatePeerAddress(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return invalidArgument("peer address \"" + std::string(address) + "\": " + std::string(why));
  };
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return bad("no :port");
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    std::string_view v6 = host.substr(1, host.size() - 2);
    if (v6.empty() || !std::all_of(v6.begin(), v6.end(), isV6Char)) return bad("bad IPv6 host");
  } else if (host.empty() || !std::all_of(host.begin(), host.end(), isHostChar)) {
    return bad("bad host (IPv6 needs brackets)");
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    return bad("port must be 1..65535");
  }
  return okStatus();
}

Result<UniqueId> makeUniqueId(std::string rootAddress) {
  HC_RETURN_IF_ERROR(validatePeerAddress(rootAddress));
  UniqueId id;
  id.rootAddress = std::move(rootAddress);
  if (::getrandom(id.key.data(), id.key.size(), 0) != static_cast<ssize_t>(id.key.size())) {
    return systemError("getrandom", errno);
  }
  return id;
}

Result<UniqueIdBytes> encodeUniqueId(const UniqueId& id) {
  if (id.rootAddress.size() > kMaxRootAddressBytes) {
    return invalidArgument("root address longer than " + std::to_string(kMaxRootAddressBytes) +
                           " bytes does not fit a unique id");
  }
  if (!id.rootAddress.empty()) HC_RETURN_IF_ERROR(validatePeerAddress(id.rootAddress));
  UniqueIdBytes out{};
  putU32(&out[0], kUniqueIdMagic);
  putU32(&out[kVersionOffset], kUniqueIdVersion);
  std::copy(id.key.begin(), id.key.end(), out.begin() + kKeyOffset);
  out[kAddressLengthOffset] = static_cast<uint8_t>(id.rootAddress.size());
  std::copy(id.rootAddress.begin(), id.rootAddress.end(), out.begin() + kUniqueIdAddressOffset);
  return out;
}

Result<UniqueId> decodeUniqueId(std::span<const uint8_t> bytes) {
  if (bytes.size() != kUniqueIdBytes) {
    return invalidArgument("a unique id has " + std::to_string(kUniqueIdBytes) + " bytes, not " +
                           std::to_string(bytes.size()));
  }
  if (getU32(&bytes[0]) != kUniqueIdMagic) {
    return invalidArgument("not a unique id made by hc_get_unique_id (bad magic)");
  }
  uint32_t version = getU32(&bytes[kVersionOffset]);
  if (version != kUniqueIdVersion) {
    return invalidArgument("unique id version " + std::to_string(version) + " is not supported");
  }
  size_t length = bytes[kAddressLengthOffset];
  if (length > kMaxRootAddressBytes) {
    return invalidArgument("unique id root address length " + std::to_string(length) + " exceeds " +
                           std::to_string(kMaxRootAddressBytes));
  }
  const size_t end = kUniqueIdAddressOffset + length;
  if (std::any_of(bytes.begin() + end, bytes.end(), [](uint8_t b) { return b != 0; })) {
    return invalidArgument("unique id has bytes after the root address (corrupt or truncated)");
  }
  UniqueId id;
  std::copy_n(bytes.begin() + kKeyOffset, kCommKeyBytes, id.key.begin());
  id.rootAddress.assign(bytes.begin() + kUniqueIdAddressOffset, bytes.begin() + end);
  if (!id.rootAddress.empty()) {
    Status s = validatePeerAddress(id.rootAddress);
    if (!s.isOk()) return invalidArgument("unique id: " + s.message());
  }
  return id;
}

}  // namespace hc::peer
