// A daemon-side Session over a socketpair, driven the way Server::onClientSocket drives one: the
// frames and submission targets and make_seeds share it. Single-threaded, like the IPC thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/session/session.h"

namespace hc::fuzz {

// The daemon settings the fixture's sessions get: a small segment, so that a fresh session per
// input stays cheap.
constexpr uint64_t kDefaultSegmentBytes = 0;  // the least the daemon makes: rings + 1 MiB heap
constexpr uint64_t kMaxSegmentBytes = 4u << 20;
constexpr uint32_t kRingEntries = 16;

class FuzzSession {
 public:
  FuzzSession();

  // Sends `frame` with `fds` descriptors (copies of /dev/null) from the client's end, receives it
  // on the daemon's end and handles it there as the server does. A non-Ok status is what the
  // server would send as an Error frame before closing the connection. Every reply the session
  // sends is drained and must pass validateFrame, as the client checks it: one that does not
  // aborts the process (a daemon bug, not a client's).
  Status frame(std::span<const uint8_t> frame, size_t fds);

  // Hello with the fixture's settings; the session is welcomed after it.
  Status hello();
  // Lets clients use cross-memory attach and probes this process's own memory, as a client would
  // (with the descriptor the protocol asks for, if any). The probe may be refused (a kernel that
  // denies access); then the session keeps copying through its segment.
  Status enableCrossMemoryAttach();
  // The offset of a fresh allocation of `bytes` in the segment's heap; 0 when the daemon refused.
  uint64_t alloc(uint64_t bytes);

  const session::SessionPtr& session() const { return session_; }

 private:
  // frame() with these descriptors.
  Status send(std::span<const uint8_t> frame, std::span<const int> fds);
  // Receives what the session sent the client; the last reply is kept for alloc().
  void drainReplies();

  UniqueFd client_;
  session::SessionPtr session_;
  std::vector<uint8_t> lastReply_;
};

// The submission target's session: welcomed, cross-memory attach on where the kernel allows it,
// and two heap allocations of kSubmitBufferBytes that entries may name. Made once per process
// (resolveOp changes nothing in it); make_seeds reads the offsets from it.
constexpr uint64_t kSubmitBufferBytes = 64u << 10;
struct SubmitFixture {
  FuzzSession session;
  uint64_t a = 0;
  uint64_t b = 0;
};
SubmitFixture& submitFixture();

// Quiets spdlog: the targets run millions of inputs that the daemon would log about.
void quietLogs();

}  // namespace hc::fuzz
