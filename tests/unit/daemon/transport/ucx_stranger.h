// A bare UCP worker for tests: an endpoint that is no peer. It opens a UCX endpoint to a
// transport's worker address (the PeerAddress minus its prefix, ucx_wire.h) and sends whatever a
// test asks under any UCX tag, as a stranger on the network, or a forger, would: no Transport,
// no hello unless the test sends one. Over tcp and self on lo, like testUcxOptions().
// Single-threaded: one thread drives it (progress()) at a time.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/ucx/ucx_wire.h"

namespace hc::transport::testing {

class Stranger {
 public:
  // How its UCX moves a message: its own choice, eager only (every byte is pushed to the receiver
  // unasked), or rendezvous for every size it can (the receiver must fetch the bytes, and the
  // stranger must progress to serve them).
  enum class Protocol { Default, Eager, Rendezvous };

  [[nodiscard]] static Result<std::unique_ptr<Stranger>> create(const PeerAddress& target,
                                                                Protocol protocol);
  // Force-closes the endpoint and drops what is unsent; does not progress.
  ~Stranger();
  Stranger(const Stranger&) = delete;
  Stranger& operator=(const Stranger&) = delete;

  // Posts a send of `bytes` at `buf`, which must stay valid until idle(). False when UCX refused.
  bool post(uint64_t ucxTag, const void* buf, size_t bytes);
  // The same, of a copy it keeps.
  bool post(uint64_t ucxTag, std::vector<uint8_t> bytes);
  // Progresses its worker once and releases finished sends; returns UCX's event count.
  unsigned progress();
  // True when every posted send has finished (well or not).
  bool idle() const { return sends_.empty(); }

 private:
  Stranger() = default;
  struct Send {
    void* ucx;
    std::vector<uint8_t> storage;
  };

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::deque<Send> sends_;
};

// The bytes of a hello naming endpoint `uuid`, asking for `stamp`, carrying `secret` (a member
// would carry the receiver's; a stranger does not know it).
std::vector<uint8_t> helloBytes(uint64_t uuid, PeerId stamp, const ucx::Secret& secret);
// The bytes of a message of `payload` under `tag`, inline, carrying `secret`.
std::vector<uint8_t> inlineBytes(const Tag& tag, std::span<const uint8_t> payload,
                                 const ucx::Secret& secret);

}  // namespace hc::transport::testing
