// Communicator: the local ranks of one communicator, the operations each has posted, and the
// matching that decides which of them can run.
//
// Each rank's operations form units: a single operation, or the operations of one group
// (GroupStart/GroupEnd). A rank's units run in its posting order, like a stream: only the unit at
// the head of a rank's queue takes part in matching. Inside the head unit every operation matches
// on its own: a collective with sequence c when every rank's head unit holds collective c, a send
// r->p with sequence s when p's head unit holds the receive from r with sequence s. Matched work
// runs at once, in any order, so a group of sends and receives completes whatever order the ranks
// posted them in. A unit leaves the head when all of its operations finished.
//
// Descriptors that disagree (a collective's op, dtype, count, root or operator; a send's and its
// receive's count or dtype) fail the communicator on every rank with the same message.
// Runs on the IPC thread only.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "daemon/observe/flight_recorder.h"
#include "daemon/session/pending_op.h"
#include "daemon/session/small_area.h"

namespace hc::session {

// Work that can run now: a collective (ops in rank order) or a transfer (ops = {send, recv}, or
// the one local op of a transfer with a rank on another daemon).
struct Match {
  struct Ref {
    int rank;
    uint64_t unit;  // serial of the unit holding the op
    size_t index;   // position in the unit
  };
  std::vector<PendingOp> ops;  // copies: they keep sessions and segments alive while running
  std::vector<Ref> refs;
  uint64_t seq = 0;  // the collective's sequence number (for logs and failures)
};

// The match's ops as the data path sees them (operandOf), in op order, each with its rank.
inline std::vector<staging::Operand> operandsOf(const Match& match) {
  std::vector<staging::Operand> out;
  out.reserve(match.ops.size());
  for (size_t i = 0; i < match.ops.size(); ++i) {
    out.push_back(operandOf(match.ops[i], match.refs[i].rank));
  }
  return out;
}

class Communicator {
 public:
  Communicator(uint64_t id, int nranks, int opTimeoutMs);

  uint64_t id() const { return id_; }
  int nranks() const { return static_cast<int>(members_.size()); }

  // Borrowed: the session outlives its membership (Engine::sessionClosed calls leave()).
  void setMember(int rank, Session* session) { members_[rank] = session; }
  const Session* member(int rank) const { return members_[rank]; }
  // A communicator that spans daemons: `rank` lives on another daemon. Collectives then match
  // among the local ranks only (the daemons meet in the inter-node step), and a transfer with a
  // remote rank matches as soon as its local side is at the head (a Match of one op).
  void markRemote(int rank) { remote_[rank] = true; }
  bool isRemote(int rank) const { return remote_[rank]; }
  bool hasMembers() const;

  // The small-operation area of an all-local communicator whose ranks asked for one (null:
  // none). It fails with the communicator, so no rank waits in it on a rank that is gone.
  void setSmallArea(std::shared_ptr<SmallArea> area) { area_ = std::move(area); }
  const std::shared_ptr<SmallArea>& smallArea() const { return area_; }

  // Adds a rank's op to its open unit; closesUnit ends the unit (the last op of a group, or an
  // op outside any group) and queues it. A unit that cannot be matched as posted (a send to self
  // without a receive from self, too many ops) completes every op of it with the error. After a
  // failure, ops complete at once with the error that failed the communicator.
  void post(int rank, PendingOp op, bool closesUnit);
  // An op that failed validation: alone it fails at once; inside a group the whole unit fails
  // with why when it closes, so no rank waits on half a group.
  void reject(int rank, const std::shared_ptr<Session>& session, uint64_t requestId,
              const Status& why, bool closesUnit);
  // Operations that matched since the last call, ready to run.
  std::vector<Match> takeMatches();
  // A match finished: completes its ops' requests with status (or the communicator's failure).
  // results, when given, holds each op's completion value (CommSplit: handle, rank, nranks).
  struct OpResult {
    uint64_t value = 0;
    int rank = 0;
    int nranks = 0;
  };
  void finishMatch(const Match& match, const Status& status,
                   const std::vector<OpResult>& results = {});

  // A rank aborted or its client died. Other ranks' pending and later ops fail with why.
  void leave(int rank, const Status& why);
  // A rank destroyed its handle: NCCL's destroy is local, so only work that needs that rank
  // (any collective, a transfer with it) fails, now or when it is posted; the rest goes on. A
  // receive from it still takes what it sent before it left: sentTo lists, for a remote rank,
  // how many sends it posted to each rank here (its daemon's goodbye); a local rank's own
  // counts are known here.
  struct SentCount {
    int src = 0;
    int dst = 0;
    uint64_t sends = 0;
  };
  void depart(int rank, const Status& why, const std::vector<SentCount>& sentTo = {});
  // Every pair (src, dst) of ranks with a send posted here, and how many: what a goodbye says.
  std::vector<SentCount> sentCounts() const;
  // Fails every waiting op now and every op posted later; running ones fail when they finish.
  void fail(const Status& why);
  bool failed() const { return !failure_.isOk(); }
  // No operation of any local rank waits or runs, and no group is open (a shrink without
  // NCCL_SHRINK_ABORT needs that). Otherwise *busy says which op of which rank is outstanding.
  bool idle(std::string* busy) const;
  const Status& failure() const { return failure_; }

  // When the oldest waiting op has waited longer than the op timeout, fails the communicator
  // with Timeout naming what it waits for. When the oldest unfinished op has waited past the
  // late report time, reports it (once per op) through the incident handler and goes on waiting.
  void checkDeadline(std::chrono::steady_clock::time_point now);
  std::optional<std::chrono::steady_clock::time_point> deadline() const;

  // What operators see. The engine gives every communicator a flight recorder, the key that
  // names it on every daemon, and a handler for incidents: "late" (see checkDeadline) and
  // "failed" (the communicator failed with operations outstanding). The handler runs on the IPC
  // thread, inside the call that found the incident, and must not call back into this object
  // but for its const accessors.
  using IncidentHandler = std::function<void(const Communicator& comm, const std::string& reason,
                                             const std::string& detail)>;
  void observe(std::shared_ptr<observe::FlightRecorder> recorder, std::string keyHex, int lateReportMs,
               IncidentHandler onIncident);
  const std::shared_ptr<observe::FlightRecorder>& recorder() const { return recorder_; }
  const std::string& keyHex() const { return keyHex_; }
  std::vector<int> localRanks() const;

 private:
  enum class State { Waiting, Running, Finished };
  struct Unit {
    uint64_t serial = 0;
    std::vector<PendingOp> ops;
    std::vector<State> states;
    size_t unfinished = 0;
    Status rejected;  // the first validation error of an op of this (open) unit
  };
  // (sender, receiver, sequence of that pair's transfers)
  using TransferKey = std::tuple<int, int, uint64_t>;

  Status checkUnit(int rank, const Unit& unit) const;
  void assignSequences(int rank, Unit& unit);
  void activateHead(int rank);
  void offerCollective(int rank, Unit& unit, size_t index);
  void offerTransfer(int rank, Unit& unit, size_t index);
  void addMatch(std::vector<Match::Ref> refs, uint64_t seq);
  Unit* headUnit(int rank, uint64_t serial);
  Status agreement(const std::vector<const PendingOp*>& ops, const std::vector<Match::Ref>& refs,
                   uint64_t seq) const;
  void popFinishedHeads(int rank);
  std::string waitingFor() const;
  // The unfinished op (waiting or running) posted first, and its rank; null when none.
  const PendingOp* oldestUnfinished(int* owner, bool* running) const;
  std::optional<std::chrono::steady_clock::time_point> lateDeadline() const;
  std::optional<std::chrono::steady_clock::time_point> timeoutDeadline() const;
  void checkLate(std::chrono::steady_clock::time_point now);
  void recordPosted(int rank, PendingOp& op);
  void recordFinished(const PendingOp& op, const Status& status);
  bool needsDeparted(int rank, const PendingOp& op) const;

  uint64_t id_;
  std::vector<Session*> members_;
  std::vector<Unit> open_;               // per rank: the group being posted
  std::vector<std::deque<Unit>> queues_;  // per rank: closed units; front() is matching
  uint64_t nextSerial_ = 1;

  // Sequence counters, per rank (and peer).
  std::vector<uint64_t> collectivesPosted_;
  // Per (rank, peer) pair that ever exchanged (pairKey): sparse, since a communicator of n ranks
  // has n^2 pairs and most never transfer. A departed remote rank's sends come from its goodbye.
  std::unordered_map<uint64_t, uint64_t> sendsPosted_;
  std::unordered_map<uint64_t, uint64_t> recvsPosted_;

  // Head-unit ops offered for matching.
  std::map<uint64_t, std::vector<std::optional<Match::Ref>>> collectives_;  // by sequence
  std::map<TransferKey, Match::Ref> sends_;
  std::map<TransferKey, Match::Ref> recvs_;
  std::vector<Match> ready_;

  std::vector<bool> remote_;             // per rank: on another daemon
  std::vector<Status> departed_;  // per rank: why it destroyed its handle (Ok while present)
  bool anyDeparted_ = false;
  Status failure_;
  int opTimeoutMs_;

  std::shared_ptr<SmallArea> area_;
  std::shared_ptr<observe::FlightRecorder> recorder_;
  std::string keyHex_;
  int lateReportMs_ = 0;
  IncidentHandler onIncident_;
  uint64_t lateReported_ = PendingOp::kNoRecord;  // the record id of the op last reported late
};

}  // namespace hc::session
