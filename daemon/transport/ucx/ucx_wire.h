// What the UCX backend puts on the wire: endpoint addresses, the 64-bit UCX tag layout and the
// control messages. No UCX types here (pure layout, unit tested without UCX).
//
// Why a layout of our own: UCX matches a receive on the 64-bit tag alone and ignores the
// endpoint, while the Transport contract matches on (peer, tag), and the contract's tag (comm 64,
// seq 64, chunk 32 bits) does not fit in 64 bits anyway. So the contract's tag never goes into
// the UCX tag. Each message becomes:
//   - a control message, UCX tag = [1 | stamp | sequence], carrying a MessageHeader (the
//     contract's tag, whole, and the length) and, for messages up to UcxOptions::inlineBytes, the
//     payload itself. progress() takes every control message out of UCX as it arrives
//     (ucp_tag_probe_nb on the control bit) and matches it in software on (peer, contract tag):
//     exact, every field, in arrival order;
//   - for a longer message, a data message, UCX tag = [0 | stamp | sequence], that the sender
//     posts right behind its header. When the header matches a posted receive, the receiver posts
//     ucp_tag_recv_nbx for exactly that UCX tag into the caller's buffer, so large payloads still
//     move by UCX's rendezvous, zero-copy.
// The stamp tells the receiver who sent a message: it is the receiver's own PeerId for the
// sender, handed to the sender in a hello message at connect(). A sender therefore holds its
// messages to a peer until that peer's hello arrives, which it does once the peer connects back
// (a receiver always connects to its senders: postRecv() needs their PeerId). The sequence
// counts the sender's messages on that connection and makes each data tag unique.
// The cost, against putting the contract's tag in the UCX tag: one small extra message per large
// send, and one copy on each side of a small one. The UCX tag would have held a fraction of the
// contract's bits, and two tags differing only in the rest would silently take each other's
// messages.
// Stale traffic: dropUnexpected() drops control messages waiting in software and receives their
// data messages into zero bytes (UCX then releases the sender); what a failed peer left in UCX is
// found with ucp_tag_probe_nb on its stamp and dropped the same way.
// Strangers: anyone with a worker's address can open a UCX endpoint to it, and the tag API does not
// say which endpoint a message came from, so the receiver trusts nothing a message announces
// (ucx_strangers.h). It takes a control message into memory only as a hello of exactly
// sizeof(HelloMessage) under stamp 0, or under the stamp of a live peer and no longer than
// kMaxHeaderBytes + UcxOptions::inlineBytes; anything else is received into zero bytes (UCX ends
// it as truncated and releases its sender), counted, and logged at a bounded rate. Data messages
// under a stamp it never handed out are dropped the same way.
// Proof: every hello and every header carries the receiver's secret, 16 random bytes drawn when
// its transport starts and published only inside its endpoint address, which travels in the
// rank table the cluster token authenticates (daemon/control/membership_proof.h); anything else
// is refused before it is matched, and a hello without it never sets a stamp. So an endpoint
// that is no member (it knows a worker address, e.g. from a port scan, but was never in a rank
// table) can make the receiver neither take a stamp nor complete a receive. Its data messages
// cannot land either: a data message is taken out of UCX only under a (stamp, sequence) that a
// proven header announced, and each connection's sequences start at a random 40-bit offset, so
// the next one is not guessable; the rest is dropped unread (ucx_progress.cc,
// dropUnannouncedData). A peer's stamp is set by the first proven hello naming its uuid and never
// changed: a daemon's hellos to one peer all carry one stamp, and a restarted daemon is a new uuid.
// What this does not stop: a party that reads the traffic between two daemons learns the secret
// as it learns the data (the data plane is authenticated against strangers, not encrypted: run
// it on a trusted fabric, or under IPsec or WireGuard, where the path is not trusted); and a
// daemon that holds the cluster token is a member, trusted like any other.
// Versions: every control message and address states transport::kWireVersion, the one version of
// what daemons say to each other; a daemon of another version is refused at Peer.Join already, so
// refusing its bytes here is defence only.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "daemon/transport/transport.h"

namespace hc::transport::ucx {

static_assert(std::endian::native == std::endian::little, "wire structs are little-endian");

// ---- UCX tag ---------------------------------------------------------------------------------
//   bit 63       1 = control message (hello, inline message, header), 0 = data message
//   bits 62..40  stamp: the receiver's PeerId for the sender (0 in a hello)
//   bits 39..0   sequence: the sender's message count on this connection, modulo 2^40
constexpr uint64_t kControlBit = 1ull << 63;
constexpr int kStampShift = 40;
constexpr uint64_t kStampMask = ((1ull << 23) - 1) << kStampShift;
constexpr uint64_t kSequenceMask = (1ull << kStampShift) - 1;
constexpr uint64_t kFullMask = ~0ull;
// The largest PeerId a stamp can carry.
constexpr PeerId kMaxStamp = (1u << 23) - 1;

constexpr uint64_t controlTag(PeerId stamp, uint64_t sequence) {
  return kControlBit | (uint64_t{stamp} << kStampShift) | (sequence & kSequenceMask);
}
constexpr uint64_t dataTag(PeerId stamp, uint64_t sequence) {
  return (uint64_t{stamp} << kStampShift) | (sequence & kSequenceMask);
}
constexpr PeerId stampOf(uint64_t ucxTag) {
  return static_cast<PeerId>((ucxTag & kStampMask) >> kStampShift);
}
constexpr uint64_t sequenceOf(uint64_t ucxTag) { return ucxTag & kSequenceMask; }

// ---- the receiver's secret -------------------------------------------------------------------
// What a message must carry to be taken (see "Proof" above).
constexpr size_t kSecretBytes = 16;
using Secret = std::array<uint8_t, kSecretBytes>;
// Compares every byte whatever the first difference: a mismatch tells nothing about where.
bool sameSecret(const Secret& a, const Secret& b);

// ---- control messages --------------------------------------------------------------------------
// transport::kWireVersion opens every control message and address, in 16 bits.
static_assert(kWireVersion <= 0xffff, "the wire version must fit its 16-bit field");

enum class ControlKind : uint8_t {
  Hello = 1,   // HelloMessage
  Inline = 2,  // MessageHeader + payload in the same UCX message
  Header = 3,  // MessageHeader; the payload follows as the data message with the same sequence
};

// HelloMessage::flags. A receiver ignores bits it does not know (daemons before this one sent 0).
// kHelloWantsHello: "I hold no hello of yours: send yours again", set when connect() found none.
// A peer's first hello can be lost to the bound on hellos held for endpoints not connected yet
// (a flood of strangers' hellos), and the daemon that lost it would then hold its sends to that
// peer for ever. The receiver answers the flag once per peer, with its own hello (same stamp,
// flag clear), so hellos never loop.
constexpr uint8_t kHelloWantsHello = 1;

// Sent first on every new endpoint: "when you send to me, stamp your messages with `stamp`".
struct HelloMessage {
  uint16_t version = kWireVersion;
  ControlKind kind = ControlKind::Hello;
  uint8_t flags = 0;
  uint32_t stamp = 0;  // the sender's PeerId for the receiver
  uint64_t uuid = 0;   // the sender's endpoint uuid (its address names it)
  Secret secret{};     // the receiver's, from its address
};
static_assert(sizeof(HelloMessage) == 32);

// The most a header may claim to be: room for fields of later versions, and no more, so that a
// corrupt length cannot make a receiver skip into (or past) a payload.
constexpr uint32_t kMaxHeaderBytes = 256;

// Opens every message of a Transport send: the wire format says what each field is, in one
// versioned header with room for later fields. Little-endian, no padding:
//   version      kWireVersion; a receiver refuses any other.
//   kind         Inline (the payload follows in the same UCX message) or Header (it follows as
//                the data message with the same sequence).
//   reserved     0; receivers ignore it.
//   headerBytes  this header's own length: sizeof(MessageHeader) from this version's sender. A
//                later version may append fields (e.g. a per-connection proof); a receiver reads
//                the fields it knows and finds an inline payload at headerBytes. This version
//                takes sizeof(MessageHeader) <= headerBytes <= kMaxHeaderBytes.
//   comm, seq, chunk  the contract's tag, every field whole (transport.h).
//   reserved2    0; receivers ignore it.
//   bytes        the payload's length: what follows the header (Inline) or the data message's
//                length (Header).
//   secret       the receiver's secret, from its address: a message without it is refused.
struct MessageHeader {
  uint16_t version = kWireVersion;
  ControlKind kind = ControlKind::Inline;
  uint8_t reserved = 0;
  uint32_t headerBytes = sizeof(MessageHeader);
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint32_t chunk = 0;
  uint32_t reserved2 = 0;
  uint64_t bytes = 0;
  Secret secret{};
};
static_assert(sizeof(MessageHeader) == 56);
static_assert(offsetof(MessageHeader, headerBytes) == 4 && offsetof(MessageHeader, comm) == 8 &&
              offsetof(MessageHeader, chunk) == 24 && offsetof(MessageHeader, bytes) == 32 &&
              offsetof(MessageHeader, secret) == 40);

// The header this version sends for a message of `bytes` with `tag` to the receiver whose secret
// is `secret`.
constexpr MessageHeader makeHeader(ControlKind kind, const Tag& tag, uint64_t bytes,
                                   const Secret& secret) {
  MessageHeader header;
  header.kind = kind;
  header.comm = tag.comm;
  header.seq = tag.seq;
  header.chunk = tag.chunk;
  header.bytes = bytes;
  header.secret = secret;
  return header;
}
constexpr Tag tagOf(const MessageHeader& header) {
  return makeTag(header.comm, header.seq, header.chunk);
}

// A control message as received; nullopt for bytes that are not one (wrong size or version,
// unknown kind, a headerBytes out of bounds, an inline payload whose length disagrees with its
// header, bytes after a Header).
struct ControlMessage {
  ControlKind kind;
  HelloMessage hello;                // kind Hello
  MessageHeader header;              // kind Inline or Header: the fields this version knows
  std::span<const uint8_t> payload;  // kind Inline: points into the parsed bytes, at headerBytes
};
std::optional<ControlMessage> parseControl(std::span<const uint8_t> bytes);

// ---- endpoint address --------------------------------------------------------------------------
// PeerAddress bytes: magic "HCUX", version, reserved, the endpoint's uuid (random per Transport,
// never 0), its secret (random per Transport), then the UCP worker address.
struct EndpointAddress {
  uint64_t uuid = 0;
  Secret secret{};
  std::span<const uint8_t> worker;  // points into the parsed bytes
};
std::vector<uint8_t> encodeAddress(uint64_t uuid, const Secret& secret,
                                   std::span<const uint8_t> worker);
std::optional<EndpointAddress> decodeAddress(std::span<const uint8_t> bytes);

}  // namespace hc::transport::ucx
