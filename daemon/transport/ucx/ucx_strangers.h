// What an endpoint that is no peer can make the UCX backend hold, and how refusals are counted.
// Private to daemon/transport/ucx; no UCX types (unit tested without UCX).
//
// Why this exists: UCX accepts a connection from anyone who has a worker's address, and its tag
// API does not say which endpoint a message came from, so any endpoint may send any bytes under
// any tag, and the backend must read some of them to find that they lack the receiver's secret
// (ucx_wire.h, "Strangers" and "Proof"). The backend therefore never sizes an allocation by what
// a message announces, holds a bounded table for hellos of endpoints it has not connected to,
// and counts what it refuses. A refusal is logged at most once
// per RefusalCounter::kLogInterval per kind: a flood must not turn into a log flood.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>

#include "daemon/transport/transport.h"

namespace hc::transport::ucx {

// Counts one kind of refusal and decides which ones are logged: the first, then at most one per
// kLogInterval, which also says how many went unlogged since the last.
class RefusalCounter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kLogInterval{10};

  // Counts one. True when this one is to be logged; unlogged() then says how many before it were
  // not, and restarts at 0.
  bool count(Clock::time_point now);
  uint64_t total() const { return total_; }
  uint64_t unlogged() const { return reportedUnlogged_; }

 private:
  uint64_t total_ = 0;
  uint64_t unlogged_ = 0;          // since the last logged one
  uint64_t reportedUnlogged_ = 0;  // what unlogged() says about the one logged last
  std::optional<Clock::time_point> nextLog_;
};

// What the UCX backend refused from endpoints it could not attribute to a live peer, or that broke
// the protocol; read by tests and, later, metrics. Every one was dropped without reading more than
// the protocol allows.
struct StrangerCounts {
  uint64_t oversizedControl = 0;  // control messages longer than any daemon sends: dropped unread
  uint64_t unknownStamp = 0;      // control messages under a stamp never handed out: dropped unread
  uint64_t malformedControl = 0;  // control messages that parse as nothing we send
  uint64_t unprovenControl = 0;   // hellos and headers without this transport's secret
  uint64_t repeatedHellos = 0;    // hellos naming an endpoint whose stamp is set: ignored
  uint64_t evictedHellos = 0;     // pending hellos dropped, oldest first, beyond the bound
  uint64_t slowHellos = 0;        // hellos still arriving beyond a few at once: left unread
  uint64_t strayData = 0;         // data messages under a stamp never handed out: dropped unread
  uint64_t unannouncedData = 0;   // data messages under a live stamp that no header announced
  uint64_t stalledControl = 0;    // control messages under a live stamp still arriving after 1 s
};

// Stamps from hellos of endpoints not connected to yet, by their uuid: a peer daemon that connects
// to us before we connect back leaves its hello here, and connect() takes it. Bounded: beyond
// `capacity` the oldest is dropped (a legitimate one is taken within moments of its arrival,
// when both daemons start the same job, so the oldest is the likeliest junk). The first hello for
// a uuid is kept: a daemon sends one per endpoint, at connect().
class PendingHellos {
 public:
  explicit PendingHellos(size_t capacity) : capacity_(capacity) {}

  enum class Added : uint8_t {
    New,          // recorded
    NewEvicting,  // recorded, and the oldest was dropped to make room
    Repeated,     // one is held for this uuid already; this one was ignored
  };
  Added add(uint64_t uuid, PeerId stamp);
  // The stamp held for `uuid`, removed from the table; nullopt when none is held.
  std::optional<PeerId> take(uint64_t uuid);
  size_t size() const { return byUuid_.size(); }

 private:
  struct Entry {
    PeerId stamp;
    uint64_t arrival;
  };
  const size_t capacity_;
  uint64_t nextArrival_ = 0;
  std::unordered_map<uint64_t, Entry> byUuid_;
  std::map<uint64_t, uint64_t> byArrival_;  // arrival -> uuid: oldest first
};

}  // namespace hc::transport::ucx
