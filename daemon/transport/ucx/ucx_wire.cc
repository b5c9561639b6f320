#include "daemon/transport/ucx/ucx_wire.h"

#include <cstring>

namespace hc::transport::ucx {
namespace {

constexpr uint32_t kAddressMagic = 0x58554348;  // "HCUX" in memory order
struct AddressPrefix {
  uint32_t magic = kAddressMagic;
  uint16_t version = kWireVersion;
  uint16_t reserved = 0;
  uint64_t uuid = 0;
  Secret secret{};
};
static_assert(sizeof(AddressPrefix) == 32);

}  // namespace

bool sameSecret(const Secret& a, const Secret& b) {
  uint8_t differ = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) differ |= a[i] ^ b[i];
  // Through a volatile read, so that the compiler keeps the whole loop.
  const volatile uint8_t result = differ;
  return result == 0;
}

std::optional<ControlMessage> parseControl(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(HelloMessage)) return std::nullopt;
  uint16_t version;
  ControlKind kind;
  std::memcpy(&version, bytes.data(), sizeof(version));
  std::memcpy(&kind, bytes.data() + sizeof(version), sizeof(kind));
  if (version != kWireVersion) return std::nullopt;
  ControlMessage message{kind, {}, {}, {}};
  switch (kind) {
    case ControlKind::Hello:
      if (bytes.size() != sizeof(HelloMessage)) return std::nullopt;
      std::memcpy(&message.hello, bytes.data(), sizeof(HelloMessage));
      return message;
    case ControlKind::Inline:
    case ControlKind::Header: {
      // The fields this version knows; a longer header's further fields are skipped.
      if (bytes.size() < sizeof(MessageHeader)) return std::nullopt;
      std::memcpy(&message.header, bytes.data(), sizeof(MessageHeader));
      const uint32_t headerBytes = message.header.headerBytes;
      if (headerBytes < sizeof(MessageHeader) || headerBytes > kMaxHeaderBytes ||
          headerBytes > bytes.size()) {
        return std::nullopt;
      }
      const size_t rest = bytes.size() - headerBytes;
      if (kind == ControlKind::Header && rest != 0) return std::nullopt;
      if (kind == ControlKind::Inline && rest != message.header.bytes) return std::nullopt;
      message.payload = bytes.subspan(headerBytes);
      return message;
    }
  }
  return std::nullopt;
}

std::vector<uint8_t> encodeAddress(uint64_t uuid, const Secret& secret,
                                   std::span<const uint8_t> worker) {
  AddressPrefix prefix;
  prefix.uuid = uuid;
  prefix.secret = secret;
  std::vector<uint8_t> bytes(sizeof(prefix) + worker.size());
  std::memcpy(bytes.data(), &prefix, sizeof(prefix));
  if (!worker.empty()) std::memcpy(bytes.data() + sizeof(prefix), worker.data(), worker.size());
  return bytes;
}

std::optional<EndpointAddress> decodeAddress(std::span<const uint8_t> bytes) {
  AddressPrefix prefix;
  if (bytes.size() <= sizeof(prefix)) return std::nullopt;
  std::memcpy(&prefix, bytes.data(), sizeof(prefix));
  if (prefix.magic != kAddressMagic || prefix.version != kWireVersion || prefix.uuid == 0) {
    return std::nullopt;
  }
  return EndpointAddress{prefix.uuid, prefix.secret, bytes.subspan(sizeof(prefix))};
}

}  // namespace hc::transport::ucx
