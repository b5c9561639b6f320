// The state of one loopback endpoint, kept in the fabric so that a send can match the
// receiver's queues directly. Private to loopback/; every field is guarded by the fabric mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "daemon/transport/loopback/loopback_transport.h"

namespace hc::transport {

// (peer, tag): what a message and a receive must agree on, every field of the tag.
struct MatchKey {
  PeerId peer;
  Tag tag;
  bool operator==(const MatchKey&) const = default;
};
struct MatchKeyHash {
  size_t operator()(const MatchKey& k) const { return hashTag(k.tag, k.peer); }
};

// A message that arrived before its receive was posted: a copy of the payload, and when it came
// (for dropUnexpected()).
struct UnexpectedCopy {
  std::vector<uint8_t> data;
  std::chrono::steady_clock::time_point arrived;
};

struct LoopbackFabric::Endpoint {
  enum class State : uint8_t {
    Posted,  // a receive waiting for its message
    Ready,   // final, waiting for progress() to report it
    Done,    // final and reported: test() returns it and releases the request
  };
  struct Request {
    PeerId peer;
    Tag tag;
    void* buf;        // receives only
    size_t capacity;  // receives only
    // Receives only: the shortest message it takes (minBytes of the endpoint's claim when `buf`
    // is memory of a kind other than Host, else 0).
    size_t minBytes = 0;
    State state = State::Posted;
    Status status;
    size_t bytes = 0;  // sent or received, on success
  };

  Endpoint(PeerId id, int eventFd) : id(id), eventFd(eventFd) {}

  // Makes `request` final with `status` (overriding an earlier final status that was not
  // reported yet) and queues it for progress(). A Posted receive leaves the posted queue.
  void finish(RequestId request, Status status, size_t bytes = 0);
  // Fails every unreported request with `peer` and drops its unmatched messages; when the peer
  // was connected and `notify`, queues one failure report for the handler.
  void failPeer(PeerId peer, const Status& why, bool notify);
  // A new request in state Posted.
  RequestId add(Request request);

  const PeerId id;
  const int eventFd;  // borrowed from the LoopbackTransport
  bool dead = false;
  std::unordered_set<PeerId> connected;
  std::unordered_set<PeerId> reportedFailed;  // peers whose failure was queued for the handler
  std::unordered_map<RequestId, Request> requests;
  std::unordered_map<MatchKey, std::deque<RequestId>, MatchKeyHash> posted;
  // Oldest first per key.
  std::unordered_map<MatchKey, std::deque<UnexpectedCopy>, MatchKeyHash> unexpected;
  std::vector<RequestId> ready;                     // final, for the next progress()
  std::vector<std::pair<PeerId, Status>> failures;  // for the next progress()
  Transport::PeerFailureHandler handler;
  RequestId nextRequest = 1;

 private:
  // Makes the eventfd readable when the first report starts waiting; progress() drains it
  // before it takes the reports, so a report queued after that drain signals again.
  void signalIfIdle();
};

}  // namespace hc::transport
