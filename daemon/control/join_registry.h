// JoinRegistry: the root daemon's pending joins, per communicator key. Knows nothing of gRPC: a
// join is a JoinRequest plus a completion callback, so a pending join costs memory, not a thread.
//
// Rules, decided here and nowhere else:
// - The first join of a key opens the communicator. When the last of its nranks ranks joins,
//   every joiner (every join, one per rank or several ranks each) gets the same RankTable, at once.
// - A daemon joins once per local rank (each training process calls CommInit on its own), or
//   with several ranks in one join. Joins with the same NodeIdentity are one node: the table has
//   one NodeEntry for it, its ranks ascending (local rank = position among them), nodes ordered by
//   their lowest rank (buildRankTable).
// - Deadline: each join brings a timeout (zero: the registry's default, 120 s); the communicator
//   fails at the earliest of its joiners' deadlines, with Timeout naming the missing ranks, for
//   every joiner. One timer thread sleeps until the next deadline.
// - A join whose nranks or agreement differs from the pending ones fails the whole communicator
//   (InvalidArgument, everyone).
// - A rank that has already joined from another node fails only the new join (InvalidArgument
//   naming the rank and both nodes); the communicator stays as it was.
// - A rank that has already joined from the same node is a retry after a lost reply: the new
//   join replaces every earlier join of that node holding one of its ranks. Each replaced join
//   gets Unavailable and its ranks leave with it (a replaced multi-rank join may so take ranks the
//   new join does not bring back).
// - All joins of one node carry the same transportAddress (one daemon, one UCX worker). A join
//   whose address differs from those of its node's remaining joins (replaced ones do not count)
//   fails the whole communicator (InvalidArgument naming the node): no table could be right.
// - Keys the root has finished with (formed or failed) are remembered for tombstoneTtl: a late
//   join of a failed communicator gets that failure at once rather than opening a new one that
//   would wait a full deadline; a late join of a formed communicator gets InvalidArgument. After
//   that, a key is unknown again and a join opens a new communicator: keys are 128-bit random,
//   so this happens only when a job reuses a unique id.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "daemon/peer/peer_types.h"

namespace hc::control {

struct JoinRegistryOptions {
  std::chrono::milliseconds defaultTimeout{120'000};
  std::chrono::milliseconds maxTimeout{24 * 3600 * 1000};
  std::chrono::milliseconds tombstoneTtl{10 * 60 * 1000};
  // Communicators forming at once: on the whole root, and opened by any one node (the first
  // join of a key opens it), so that one joiner cannot take every slot. A join refused for
  // capacity gets NoResource, and the joiner retries until its deadline (peer_client.h).
  size_t maxPendingComms = 4096;
  size_t maxPendingCommsPerNode = 1024;
  size_t maxTombstones = 4096;
};

// Runs exactly once per join, on the thread that settles it: the caller of add() or withdraw()
// that completes or fails the communicator, the timer thread, or shutdown(). Must not block and
// must not call back into the registry.
using JoinDone = std::function<void(Result<peer::RankTable>)>;
using JoinTicket = uint64_t;

class JoinRegistry {
 public:
  explicit JoinRegistry(JoinRegistryOptions options = {});
  ~JoinRegistry();  // shutdown()
  JoinRegistry(const JoinRegistry&) = delete;
  JoinRegistry& operator=(const JoinRegistry&) = delete;

  // Names a join before add(), so its owner can withdraw it even while add() runs elsewhere.
  // Never 0.
  JoinTicket newTicket();
  // Adds a join that passed validateJoin(), under a ticket from newTicket() used once. `done`
  // may run before add() returns.
  void add(JoinTicket ticket, peer::JoinRequest request, JoinDone done);
  // Removes a still-pending join whose caller went away. True if it was pending: then `done`
  // will never run and the caller settles the join itself.
  bool withdraw(const peer::CommKey& key, JoinTicket ticket);
  // Fails every pending join with Unavailable and every later add() too. Idempotent.
  void shutdown();

  // For tools and tests: the ranks that have joined the pending communicator `key` (empty if
  // none is pending), and a wait until exactly `count` have.
  std::vector<uint32_t> joinedRanks(const peer::CommKey& key) const;
  bool waitForJoinedCount(const peer::CommKey& key, size_t count,
                          std::chrono::milliseconds timeout) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Participant {
    JoinTicket ticket;
    peer::JoinRequest request;
    JoinDone done;
  };
  // What the registry knows of a node from its pending joins. They all carry one address.
  struct PendingNode {
    std::string transportAddress;
    size_t joins = 0;
  };
  struct PendingComm {
    uint32_t nranks = 0;
    uint64_t agreement = 0;  // JoinRequest::agreement, which every join must repeat
    std::map<JoinTicket, Participant> participants;
    // The join that brought each rank that has joined: as large as the joins so far, never
    // nranks, so a communicator announced with a million ranks costs what its joiners brought.
    std::unordered_map<uint32_t, JoinTicket> holder;
    peer::NodeIdentity opener;  // the node whose join opened it
    std::map<peer::NodeIdentity, PendingNode> nodes;
    size_t joinedCount = 0;
    Clock::time_point opened;
    Clock::time_point deadline;
  };
  struct Tombstone {
    Status failure;  // Ok: the communicator formed
    Clock::time_point expiry;
  };
  // Callbacks to run once the lock is released.
  using Settlements = std::vector<std::pair<JoinDone, Result<peer::RankTable>>>;

  void addLocked(JoinTicket ticket, peer::JoinRequest request, JoinDone done, Settlements& out);
  Status lateJoinStatusLocked(const peer::CommKey& key, Clock::time_point now);
  // `key` by value: callers may pass a reference into the node this erases.
  void failCommLocked(peer::CommKey key, const Status& failure, Settlements& out);
  void formCommLocked(peer::CommKey key, Settlements& out);
  void removeParticipantLocked(PendingComm& comm,
                               std::map<JoinTicket, Participant>::iterator participant);
  void rememberLocked(const peer::CommKey& key, Status failure, Clock::time_point now);
  // Erases a pending communicator and gives its opener's slot back.
  void eraseLocked(std::map<peer::CommKey, PendingComm>::iterator it);
  static Status deadlineFailure(const peer::CommKey& key, const PendingComm& comm,
                                Clock::time_point now);
  static void settle(Settlements& settlements);
  void timerLoop();

  const JoinRegistryOptions options_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // membership changed (for waitForJoinedCount)
  std::condition_variable timerWake_;        // a deadline moved earlier, or shutdown
  bool stopping_ = false;
  JoinTicket nextTicket_ = 1;
  std::map<peer::CommKey, PendingComm> pending_;
  std::map<peer::NodeIdentity, size_t> openedBy_;  // pending communicators per opening node
  std::map<peer::CommKey, Tombstone> tombstones_;
  std::once_flag timerJoined_;
  std::thread timer_;
};

}  // namespace hc::control
