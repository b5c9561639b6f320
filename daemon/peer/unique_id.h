// The 128-byte unique id of hc_get_unique_id, as the daemons read it: which root daemon forms the
// communicator and under which random key. Layout (integers little-endian), compatible with the
// ids client/src/comm_api.cc makes today, which leave the address empty:
//   [0, 4)     magic "HCID" (0x44494348)
//   [4, 8)     version, 1
//   [8, 24)    communicator key, 16 random bytes
//   [24]       length L of the root's peer address, 0..103; 0 = no root named (one-node job)
//   [25, 25+L) the root's peer address, "host:port" or "[v6]:port", printable ASCII
//   the rest   zero
// Depends on hc_common only, so it could move to common/ipc for the client to share.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/peer/peer_types.h"

namespace hc::peer {

constexpr size_t kUniqueIdBytes = 128;
constexpr uint32_t kUniqueIdMagic = 0x44494348;  // "HCID" in memory order
constexpr uint32_t kUniqueIdVersion = 1;
constexpr size_t kUniqueIdAddressOffset = 25;
constexpr size_t kMaxRootAddressBytes = kUniqueIdBytes - kUniqueIdAddressOffset;

using UniqueIdBytes = std::array<uint8_t, kUniqueIdBytes>;

struct UniqueId {
  std::string rootAddress;  // empty: no root daemon named
  CommKey key{};

  bool operator==(const UniqueId&) const = default;
};

// A fresh id naming `rootAddress` with a random key (getrandom).
[[nodiscard]] Result<UniqueId> makeUniqueId(std::string rootAddress);

[[nodiscard]] Result<UniqueIdBytes> encodeUniqueId(const UniqueId& id);
// InvalidArgument, saying what is wrong, for anything encodeUniqueId could not have made.
[[nodiscard]] Result<UniqueId> decodeUniqueId(std::span<const uint8_t> bytes);

// "host:port" with a DNS name or IPv4 host, or "[v6]:port"; port 1..65535.
[[nodiscard]] Status validatePeerAddress(std::string_view address);

}  // namespace hc::peer
