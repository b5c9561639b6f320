// hc::transport::Transport: tagged, non-blocking point-to-point messages between daemons, the
// shape of UCX's tag API. Implementations: loopback/ (in-process, for tests) today; ucx/ (the only
// place UCX headers appear) next.
// Depends on hc_common only. coll/ drives a Transport; a Transport knows nothing of
// communicators except the tag below.
//
// Work goes post -> progress -> test: postSend()/postRecv() lend a buffer and return a request;
// progress() moves requests forward; test() reports the outcome and, once final, releases the
// request and returns the buffer to the caller. No call here throws or blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hc::transport {

// Memory a Transport may be lent: host memory, or GPU memory that the backend moves itself (UCX
// built with CUDA or ROCm support reads and writes it directly, by GPUDirect RDMA where the NIC
// and driver allow). Whether a backend moves a kind is movesMemory(); whether that is truly zero
// copy, and faster than staging through host memory, only a probe can tell (staging/
// direct_probe.h).
enum class MemoryKind : uint8_t { Host, Cuda, Rocm };
const char* memoryKindName(MemoryKind kind);  // "host", "cuda", "rocm"

// Names a connected peer daemon on this endpoint. Only ids returned by connect() are valid.
using PeerId = uint32_t;
// Names one posted send or receive on this endpoint; 0 is never valid.
using RequestId = uint64_t;

// Where a peer can be reached: the bytes its Transport::address() returned, carried to us by the
// control plane (Peer.Join rank table). Opaque outside the backend that made them.
struct PeerAddress {
  std::vector<uint8_t> bytes;
};

// ---- tags ------------------------------------------------------------------------------------
// A tag names one message of one operation of one communicator, in three fields that travel
// whole (no field is folded into another, and matching compares all of them):
//   comm   the communicator's identity across daemons: 64 bits the root daemon draws at random
//          when the communicator forms (split children: drawn by a member daemon and carried in
//          the split's exchange), carried in the signed rank table, and refused at formation by
//          a daemon that already knows it (daemon/coll/net/comm_identities.h). Never bits of the
//          communicator's key: two jobs never share an identity by choosing keys. Identities
//          below kFirstCommIdentity name traffic between a pair of daemons that belongs to no
//          communicator (heartbeats, the direct probe).
//   seq    the operation within the communicator: its user's layer decides the layout (the
//          engine's: daemon/session/net_seq.h).
//   chunk  assigned by the algorithm: its step and chunk index within the operation.
struct Tag {
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint32_t chunk = 0;

  bool operator==(const Tag&) const = default;
  auto operator<=>(const Tag&) const = default;
};

constexpr Tag makeTag(uint64_t comm, uint64_t seq, uint32_t chunk) { return Tag{comm, seq, chunk}; }

// Which bits of each field a pattern compares (discardUnexpected()).
constexpr Tag kMatchComm{~0ull, 0, 0};
constexpr Tag kMatchCommSeq{~0ull, ~0ull, 0};
constexpr Tag kMatchAll{~0ull, ~0ull, ~0u};

constexpr bool tagMatches(const Tag& tag, const Tag& pattern, const Tag& mask) {
  return ((tag.comm ^ pattern.comm) & mask.comm) == 0 &&
         ((tag.seq ^ pattern.seq) & mask.seq) == 0 &&
         ((tag.chunk ^ pattern.chunk) & mask.chunk) == 0;
}

// "comm/seq/chunk" in hex, for messages.
std::string tagString(const Tag& tag);

// For hash maps keyed by (peer, tag).
constexpr size_t hashTag(const Tag& tag, uint32_t peer) {
  uint64_t x = tag.comm * 0x9e3779b97f4a7c15ull;
  x ^= (tag.seq + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  x ^= (uint64_t{tag.chunk} << 32 | peer) * 0x94d049bb133111ebull;
  return static_cast<size_t>(x ^ (x >> 31));
}

// Identities that no communicator uses: the executors' heartbeats and the startup probe.
constexpr uint64_t kHeartbeatIdentity = 1;
constexpr uint64_t kProbeIdentity = 2;
constexpr uint64_t kFirstCommIdentity = 256;

// The version of everything daemons say to each other over a Transport: the tag above and what
// the engine puts in it, and each backend's framing (ucx_wire.h). Daemons state it in Peer.Join,
// and a communicator forms only among daemons of one version. Bump it with any change to those.
// Version 1: 16 identity bits taken from the key; 2: the fields above; 3: the engine's notices
// of 2048 bytes, goodbyes with send counts (daemon/session/notices.h); 4: an op's failure
// notice carries its origin and words, 512 bytes (daemon/coll/net/op_notice.h); 5: the UCX
// backend's hellos and headers carry the receiver's secret, and its address holds it
// (daemon/transport/ucx/ucx_wire.h, "Proof").
constexpr uint32_t kWireVersion = 5;

// A message that arrived with no receive posted, as dropUnexpected() shows it.
struct UnexpectedMessage {
  PeerId peer = 0;
  Tag tag;
  size_t bytes = 0;  // its payload's length
  std::chrono::steady_clock::time_point arrived;
};

// ---- the interface ---------------------------------------------------------------------------
// Threads: a Transport endpoint is driven by the one progress thread that owns it (a UCX worker
// is single-threaded); other threads post work to that thread. eventFd() and name() may be read
// from anywhere. An implementation that allows more says so in its header.
// Matching: a receive matches exactly one send with the same peer and the same tag (no
// wildcards). Sends from one peer with one tag match receives in the order each side posted
// them. A backend whose native matching ignores the peer (UCX tag matching ignores the
// endpoint) must add the sender to what it matches on itself.
// Failure: a request that cannot finish because its peer went away fails with Unavailable, and
// the peer-failure handler is called once for that peer; later posts to it return Unavailable.
class Transport {
 public:
  using PeerFailureHandler = std::function<void(PeerId peer, const Status& why)>;

  virtual ~Transport() = default;

  // "loopback", "ucx": for logs and metrics labels.
  virtual std::string_view name() const = 0;
  // What peers pass to connect() to reach this endpoint.
  virtual PeerAddress address() const = 0;

  // Non-blocking: the connection may finish in the background; requests posted meanwhile
  // queue behind it. Connecting to an already connected peer returns its id. Unavailable when
  // the peer is known to be gone; InvalidArgument for an address this backend cannot parse.
  [[nodiscard]] virtual Result<PeerId> connect(const PeerAddress& address) = 0;
  // Pending requests with the peer fail with Unavailable (test() reports them after the next
  // progress()); the handler is not called, since the caller asked for it.
  [[nodiscard]] virtual Status disconnect(PeerId peer) = 0;

  // Whether buffers of this kind may be lent to postSend()/postRecv(). Host always.
  virtual bool movesMemory(MemoryKind kind) const = 0;
  // Buffers of a kind other than Host are lent only for messages of at least this many bytes:
  // shorter ones may travel with a CPU copy on either side (UCX: inside their header), which
  // device memory does not allow. A short message that reaches a device-memory receive fails
  // it with TransportError instead.
  virtual size_t directMinBytes() const = 0;

  // Non-blocking. Lends [buf, buf + bytes), memory of `kind`, until test() reports the send
  // final; a send is complete once the buffer may be reused, which does not mean the peer
  // received it. bytes may be 0 (then buf may be null). NotFound for a peer that was never
  // connected; InvalidArgument for a kind this backend does not move.
  [[nodiscard]] virtual Result<RequestId> postSend(PeerId peer, Tag tag, const void* buf,
                                                   size_t bytes, MemoryKind kind) = 0;
  [[nodiscard]] Result<RequestId> postSend(PeerId peer, Tag tag, const void* buf, size_t bytes) {
    return postSend(peer, tag, buf, bytes, MemoryKind::Host);
  }
  // Non-blocking. Lends [buf, buf + bytes), memory of `kind`, until test() reports the receive
  // final. A message shorter than the buffer fills its front (test() gives its length); a longer
  // one fails the receive with TransportError and leaves the buffer's contents undefined: never
  // a silent truncation.
  [[nodiscard]] virtual Result<RequestId> postRecv(PeerId peer, Tag tag, void* buf, size_t bytes,
                                                   MemoryKind kind) = 0;
  [[nodiscard]] Result<RequestId> postRecv(PeerId peer, Tag tag, void* buf, size_t bytes) {
    return postRecv(peer, tag, buf, bytes, MemoryKind::Host);
  }

  // Non-blocking; does not progress. false while the request is in progress; true when it
  // completed (then *bytes, if bytes is not null, holds the bytes sent or received); an error
  // when it failed. After true or an error the request is released and its id is invalid
  // (NotFound thereafter).
  [[nodiscard]] virtual Result<bool> test(RequestId request, size_t* bytes) = 0;
  [[nodiscard]] Result<bool> test(RequestId request) { return test(request, nullptr); }

  // Drives sends, receives and failure detection; runs the peer-failure handler (on this thread,
  // with no transport lock held, so it may call back in). Returns how many requests became final
  // plus how many peers were reported failed; 0 means there was nothing to do.
  virtual size_t progress() = 0;

  // Non-blocking. Asks a request to stop. A request that has not matched yet ends with
  // Unavailable ("cancelled"), reported by test() after the next progress(); one that has
  // already matched or finished is not affected. Either way the buffer is lent until test()
  // reports a final state. NotFound for an unknown id.
  [[nodiscard]] virtual Status cancel(RequestId request) = 0;

  // Calls `drop` on every message that arrived with no receive posted, oldest first per (peer,
  // tag), and drops those for which it returns true (a dropped message's sender is released as
  // if a receive had taken it). Returns how many were dropped. `drop` must not call back in.
  virtual size_t dropUnexpected(const std::function<bool(const UnexpectedMessage&)>& drop) = 0;
  // Drops messages that arrived with no receive posted and whose tag matches `tag` on the bits
  // of `mask` (e.g. kMatchComm for everything of one communicator). Returns how many.
  size_t discardUnexpected(const Tag& tag, const Tag& mask) {
    return dropUnexpected([&](const UnexpectedMessage& m) { return tagMatches(m.tag, tag, mask); });
  }

  // Readable when progress() would find something to do; progress() consumes the readiness.
  // The owner's loop: progress() until it returns 0, then epoll on this fd. -1 when the backend
  // has none: the owner then polls progress(). Owned by the transport.
  virtual int eventFd() const = 0;

  // Replaces the handler called when a connected peer fails. May be empty (no notification).
  virtual void setPeerFailureHandler(PeerFailureHandler handler) = 0;
};

}  // namespace hc::transport
