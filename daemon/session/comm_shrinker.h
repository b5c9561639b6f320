// CommShrinker: ncclCommShrink and ncclCommRevoke as this daemon serves them.
//
// A shrink is collective over the parent's survivors only, so it never runs through the parent's
// matching or wire (a failed parent, or one whose root daemon is gone, still shrinks). Each local
// survivor posts its exclude list; once every local rank not excluded has posted, and all named
// the same ranks, the child forms: here, when every survivor is on this daemon; otherwise each
// local survivor joins the child at the daemon of the lowest surviving rank, under a key derived
// from the parent's and the shrink's generation, as a CommInit naming that root would. The root
// draws the child's identity as for every spanning communicator, and fails every join when one
// daemon's exclude list differs (JoinRequest::agreement). Survivors keep their order: the new
// rank of a survivor is the number of survivors below it, as NCCL numbers them.
//
// A revoke stops the parent's operations: those waiting fail now, those on the wire are stopped,
// and the failure notice reaches the parent's other daemons, whose ranks' operations fail too.
// The parent stays a parent for shrink. Runs on the IPC thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/ipc/protocol.h"
#include "daemon/session/comm_joiner.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_context.h"
#include "daemon/session/net_runner.h"
#include "daemon/session/session.h"

namespace hc::session {

class CommShrinker {
 public:
  using Clock = std::chrono::steady_clock;

  // Borrowed: all three outlive this object.
  CommShrinker(EngineContext* context, NetRunner* net, CommJoiner* joiner)
      : context_(*context), net_(*net), joiner_(*joiner) {}
  CommShrinker(const CommShrinker&) = delete;
  CommShrinker& operator=(const CommShrinker&) = delete;

  // Entry `e` (CommShrink) of rank `rank` of `parent`: completes when the child formed (its
  // handle, the caller's rank in it and its size) or the shrink failed.
  void shrink(const SessionPtr& session, const ipc::SubmitEntry& e,
              const std::shared_ptr<Communicator>& parent, int rank);
  // Entry `e` (CommRevoke) of rank `rank` of `parent`: completes once its operations stopped here.
  void revoke(const SessionPtr& session, const ipc::SubmitEntry& e,
              const std::shared_ptr<Communicator>& parent, int rank);

  // The client went away: its ranks leave the shrinks they wait in; a shrink that now waits for
  // a rank that is gone and not excluded fails.
  void sessionClosed(const SessionPtr& session);
  // Shrinks whose deadline passed fail with Timeout, naming the local ranks that did not call.
  void failLate(Clock::time_point now);
  std::optional<Clock::time_point> nextDeadline() const;
  // Shutdown: every shrink under way fails with `why`.
  void failAll(const Status& why);

 private:
  struct Caller {
    SessionPtr session;
    uint64_t requestId = 0;
  };
  // A shrink of one parent, gathering this daemon's survivors.
  struct Pending {
    std::shared_ptr<Communicator> parent;
    std::vector<int> exclude;  // ascending
    uint32_t flags = 0;
    int timeoutMs = 0;
    Clock::time_point deadline;
    std::map<int, Caller> callers;  // by parent rank
    int firstRank = -1;             // whose list and flags the others must repeat
    // Set when the lists or flags differed: survivors still to call hear it until the deadline.
    // A shrink that fails once every survivor here called (one left unexcluded, a busy parent
    // without NCCL_SHRINK_ABORT) is forgotten at once, so a corrected call starts afresh.
    Status failure;
  };

  // Forms the child once every local survivor called; fails the shrink when one never can.
  void advance(uint64_t parentId);
  void fail(Pending& pending, const Status& why);
  void formHere(Pending& pending, const std::vector<int>& survivors, const std::string& keyHex);
  void joinAtRoot(Pending& pending, const std::vector<int>& survivors, const std::string& keyHex,
                  const coll::hier::NodeLayout& layout);

  EngineContext& context_;
  NetRunner& net_;
  CommJoiner& joiner_;
  std::map<uint64_t, Pending> pending_;       // by parent communicator id
  std::map<uint64_t, uint32_t> generations_;  // by parent communicator id: shrinks begun
};

}  // namespace hc::session
