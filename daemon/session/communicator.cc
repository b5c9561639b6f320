#include "daemon/session/communicator.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/session/session.h"
#include "daemon/session/validate.h"

namespace hc::session {
namespace {

uint64_t pairKey(int rank, int peer) {
  return uint64_t{static_cast<uint32_t>(rank)} << 32 | static_cast<uint32_t>(peer);
}

}  // namespace

Communicator::Communicator(uint64_t id, int nranks, int opTimeoutMs)
    : id_(id),
      members_(nranks, nullptr),
      open_(nranks),
      queues_(nranks),
      collectivesPosted_(nranks, 0),
      remote_(nranks, false),
      departed_(nranks),
      opTimeoutMs_(opTimeoutMs) {}

bool Communicator::hasMembers() const {
  return std::any_of(members_.begin(), members_.end(), [](Session* m) { return m != nullptr; });
}

void Communicator::post(int rank, PendingOp op, bool closesUnit) {
  if (failed()) {
    op.session->complete(op.requestId, failure_);
    return;
  }
  open_[rank].ops.push_back(std::move(op));
  if (!closesUnit) return;
  Unit unit = std::move(open_[rank]);
  open_[rank] = Unit{};
  Status s = unit.rejected.isOk() ? checkUnit(rank, unit) : unit.rejected;
  if (!s.isOk()) {
    for (auto& o : unit.ops) o.session->complete(o.requestId, s);
    return;
  }
  unit.serial = nextSerial_++;
  unit.states.assign(unit.ops.size(), State::Waiting);
  unit.unfinished = unit.ops.size();
  assignSequences(rank, unit);
  queues_[rank].push_back(std::move(unit));
  if (queues_[rank].size() == 1) activateHead(rank);
}

void Communicator::reject(int rank, const std::shared_ptr<Session>& session, uint64_t requestId,
                          const Status& why, bool closesUnit) {
  if (failed()) {
    session->complete(requestId, failure_);
    return;
  }
  Unit& unit = open_[rank];
  if (unit.ops.empty() && closesUnit) {
    session->complete(requestId, why);
    return;
  }
  if (unit.rejected.isOk()) {
    unit.rejected = Status{why.code(), "group rejected: " + why.message()};
  }
  PendingOp placeholder;
  placeholder.requestId = requestId;
  placeholder.session = session;
  post(rank, std::move(placeholder), closesUnit);
}

Status Communicator::checkUnit(int rank, const Unit& unit) const {
  if (unit.ops.size() > ipc::kMaxGroupOps) {
    return invalidArgument("a group holds " + std::to_string(unit.ops.size()) +
                           " operations on one communicator; at most " +
                           std::to_string(ipc::kMaxGroupOps) + " are allowed");
  }
  // A transfer to self matches only inside its own unit: one left over would wait for a
  // partner that can only come after it, on the same rank.
  int selfSends = 0, selfRecvs = 0;
  for (const auto& op : unit.ops) {
    if (op.type == OpType::Send && op.root == rank) ++selfSends;
    if (op.type == OpType::Recv && op.root == rank) ++selfRecvs;
  }
  if (selfSends != selfRecvs) {
    return invalidArgument("a send to self needs a matching receive from self in the same group (" +
                           std::to_string(selfSends) + " sends, " + std::to_string(selfRecvs) +
                           " receives to self)");
  }
  return okStatus();
}

void Communicator::assignSequences(int rank, Unit& unit) {
  for (auto& op : unit.ops) {
    if (op.type == OpType::Send) {
      op.seq = sendsPosted_[pairKey(rank, op.root)]++;
    } else if (op.type == OpType::Recv) {
      op.seq = recvsPosted_[pairKey(rank, op.root)]++;
    } else {
      op.seq = collectivesPosted_[rank]++;
    }
    recordPosted(rank, op);
  }
}

void Communicator::activateHead(int rank) {
  if (queues_[rank].empty()) return;
  Unit& unit = queues_[rank].front();
  for (size_t i = 0; i < unit.ops.size() && !failed(); ++i) {
    if (anyDeparted_ && needsDeparted(rank, unit.ops[i])) {
      const int gone =
          isPointToPoint(unit.ops[i].type) && !departed_[unit.ops[i].root].isOk()
              ? unit.ops[i].root
              : static_cast<int>(std::find_if(departed_.begin(), departed_.end(),
                                              [](const Status& d) { return !d.isOk(); }) -
                                 departed_.begin());
      fail(Status{departed_[gone].code(),
                  describeOp(unit.ops[i]) + " of rank " + std::to_string(rank) + " needs rank " +
                      std::to_string(gone) + ", which " + departed_[gone].message()});
      return;
    }
    if (isPointToPoint(unit.ops[i].type)) {
      offerTransfer(rank, unit, i);
    } else {
      offerCollective(rank, unit, i);
    }
  }
}

void Communicator::offerCollective(int rank, Unit& unit, size_t index) {
  const uint64_t seq = unit.ops[index].seq;
  auto& slot = collectives_[seq];
  slot.resize(members_.size());
  slot[rank] = Match::Ref{rank, unit.serial, index};
  std::vector<Match::Ref> refs;
  for (size_t r = 0; r < slot.size(); ++r) {
    if (remote_[r]) continue;
    if (!slot[r].has_value()) return;
    refs.push_back(*slot[r]);
  }
  collectives_.erase(seq);
  addMatch(std::move(refs), seq);
}

void Communicator::offerTransfer(int rank, Unit& unit, size_t index) {
  const PendingOp& op = unit.ops[index];
  const Match::Ref ref{rank, unit.serial, index};
  const bool isSend = op.type == OpType::Send;
  if (remote_[op.root]) {
    addMatch({ref}, op.seq);
    return;
  }
  const TransferKey key =
      isSend ? TransferKey{rank, op.root, op.seq} : TransferKey{op.root, rank, op.seq};
  auto& partners = isSend ? recvs_ : sends_;
  auto it = partners.find(key);
  if (it == partners.end()) {
    (isSend ? sends_ : recvs_)[key] = ref;
    return;
  }
  Match::Ref partner = it->second;
  partners.erase(it);
  addMatch(isSend ? std::vector<Match::Ref>{ref, partner} : std::vector<Match::Ref>{partner, ref},
           op.seq);
}

Communicator::Unit* Communicator::headUnit(int rank, uint64_t serial) {
  if (queues_[rank].empty() || queues_[rank].front().serial != serial) return nullptr;
  return &queues_[rank].front();
}

void Communicator::addMatch(std::vector<Match::Ref> refs, uint64_t seq) {
  std::vector<const PendingOp*> ops;
  for (const auto& r : refs) ops.push_back(&headUnit(r.rank, r.unit)->ops[r.index]);
  Status s = agreement(ops, refs, seq);
  if (!s.isOk()) {
    spdlog::warn("communicator {:x}: {}", id_, s.message());
    fail(s);
    return;
  }
  Match m;
  m.seq = seq;
  for (const auto& r : refs) {
    Unit* u = headUnit(r.rank, r.unit);
    u->states[r.index] = State::Running;
    m.ops.push_back(u->ops[r.index]);
  }
  m.refs = std::move(refs);
  ready_.push_back(std::move(m));
}

Status Communicator::agreement(const std::vector<const PendingOp*>& ops,
                               const std::vector<Match::Ref>& refs, uint64_t seq) const {
  const PendingOp& a = *ops[0];
  if (isPointToPoint(a.type)) {
    if (ops.size() == 1) return okStatus();  // the other side is on another daemon
    const PendingOp& b = *ops[1];            // the receive
    if (a.count == b.count && a.dtype == b.dtype) return okStatus();
    return invalidArgument(mismatchText("transfer " + std::to_string(seq), refs[0].rank,
                                        describeOp(a), "sent", refs[1].rank, describeOp(b),
                                        "received"));
  }
  for (size_t r = 1; r < ops.size(); ++r) {
    const PendingOp& b = *ops[r];
    bool same = a.type == b.type;
    if (same && a.type != OpType::CommSplit) {
      same = a.dtype == b.dtype && a.count == b.count && a.root == b.root && a.redop == b.redop;
    }
    if (!same) {
      return invalidArgument(mismatchText("op " + std::to_string(seq), refs[0].rank, describeOp(a),
                                          "posted", refs[r].rank, describeOp(b), "posted"));
    }
  }
  return okStatus();
}

std::vector<Match> Communicator::takeMatches() {
  std::vector<Match> out;
  out.swap(ready_);
  if (recorder_) {
    for (const Match& m : out) {
      for (const PendingOp& op : m.ops) {
        if (op.recordId != PendingOp::kNoRecord) recorder_->started(op.recordId);
      }
    }
  }
  return out;
}

void Communicator::finishMatch(const Match& match, const Status& status,
                               const std::vector<OpResult>& results) {
  if (!status.isOk() && !failed()) fail(status);
  const Status& result = failed() ? failure_ : status;
  std::vector<int> ranks;
  for (size_t i = 0; i < match.refs.size(); ++i) {
    const Match::Ref& ref = match.refs[i];
    OpResult r = i < results.size() ? results[i] : OpResult{};
    match.ops[i].session->complete(match.ops[i].requestId, result, r.value, r.rank, r.nranks);
    recordFinished(match.ops[i], result);
    if (Unit* u = headUnit(ref.rank, ref.unit)) {
      u->states[ref.index] = State::Finished;
      --u->unfinished;
    }
    ranks.push_back(ref.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (int r : ranks) popFinishedHeads(r);
}

void Communicator::popFinishedHeads(int rank) {
  auto& q = queues_[rank];
  bool popped = false;
  while (!q.empty() && q.front().unfinished == 0) {
    q.pop_front();
    popped = true;
  }
  if (popped) activateHead(rank);
}

bool Communicator::idle(std::string* busy) const {
  int owner = -1;
  bool running = false;
  if (const PendingOp* op = oldestUnfinished(&owner, &running)) {
    *busy = "rank " + std::to_string(owner) + " has " + describeOp(*op) +
            (running ? " running" : " waiting");
    return false;
  }
  for (size_t r = 0; r < open_.size(); ++r) {
    if (!open_[r].ops.empty()) {
      *busy = "rank " + std::to_string(r) + " has a group open";
      return false;
    }
  }
  return true;
}

void Communicator::leave(int rank, const Status& why) {
  members_[rank] = nullptr;
  fail(why);
}

void Communicator::depart(int rank, const Status& why, const std::vector<SentCount>& sentTo) {
  for (const SentCount& c : sentTo) {
    if (c.src == rank && remote_[rank] && c.dst >= 0 && c.dst < nranks() && !remote_[c.dst]) {
      sendsPosted_[pairKey(c.src, c.dst)] = c.sends;
    }
  }
  members_[rank] = nullptr;
  departed_[rank] = why;
  anyDeparted_ = true;
  // Every small collective needs every rank.
  if (area_) area_->fail(why);
  // Work already waiting that needs the departed rank can never match; a partly posted group
  // of the departed rank itself is abandoned with it.
  bool doomed = !open_[rank].ops.empty() || !queues_[rank].empty();
  for (size_t r = 0; r < queues_.size() && !doomed; ++r) {
    if (queues_[r].empty()) continue;
    const Unit& u = queues_[r].front();
    for (size_t i = 0; i < u.ops.size() && !doomed; ++i) {
      doomed = u.states[i] == State::Waiting && needsDeparted(static_cast<int>(r), u.ops[i]);
    }
  }
  if (doomed) fail(Status{why.code(), "rank " + std::to_string(rank) + " " + why.message()});
}

bool Communicator::needsDeparted(int rank, const PendingOp& op) const {
  if (!departed_[rank].isOk()) return true;
  if (!isPointToPoint(op.type)) return true;  // a collective needs every rank
  if (departed_[op.root].isOk()) return false;
  // A send the departed rank posted before it left is still there to receive.
  if (op.type != OpType::Recv) return true;
  auto sent = sendsPosted_.find(pairKey(op.root, rank));
  return sent == sendsPosted_.end() || op.seq >= sent->second;
}

std::vector<Communicator::SentCount> Communicator::sentCounts() const {
  std::vector<SentCount> counts;
  for (const auto& [key, sends] : sendsPosted_) {
    counts.push_back(
        SentCount{static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu), sends});
  }
  return counts;
}

void Communicator::fail(const Status& why) {
  const bool first = failure_.isOk();
  if (first) {
    failure_ = why;
    if (recorder_) recorder_->commFailed(why);
  }
  if (area_) area_->fail(failure_);
  // Work outstanding when the communicator fails is what operators need the record of.
  bool outstanding = !ready_.empty();
  for (const auto& q : queues_) outstanding = outstanding || !q.empty();
  for (auto& unit : open_) {
    for (auto& op : unit.ops) op.session->complete(op.requestId, failure_);
    unit = Unit{};
  }
  for (auto& q : queues_) {
    for (auto& unit : q) {
      for (size_t i = 0; i < unit.ops.size(); ++i) {
        // Running ops complete when their match finishes: the client must not reuse a buffer
        // the daemon may still write.
        if (unit.states[i] == State::Waiting) {
          unit.ops[i].session->complete(unit.ops[i].requestId, failure_);
          recordFinished(unit.ops[i], failure_);
        }
      }
    }
    q.clear();
  }
  // Matched but not yet taken: nothing has touched their buffers, so they fail now.
  for (auto& m : ready_) {
    for (auto& op : m.ops) {
      op.session->complete(op.requestId, failure_);
      recordFinished(op, failure_);
    }
  }
  ready_.clear();
  collectives_.clear();
  sends_.clear();
  recvs_.clear();
  if (first && outstanding && onIncident_) onIncident_(*this, "failed", failure_.toString());
}

std::optional<std::chrono::steady_clock::time_point> Communicator::deadline() const {
  const auto late = lateDeadline();
  const auto timeout = timeoutDeadline();
  if (late && timeout) return std::min(*late, *timeout);
  return late ? late : timeout;
}

std::optional<std::chrono::steady_clock::time_point> Communicator::timeoutDeadline() const {
  if (opTimeoutMs_ <= 0 || failed()) return std::nullopt;
  std::optional<std::chrono::steady_clock::time_point> first;
  for (const auto& q : queues_) {
    if (q.empty()) continue;
    const Unit& u = q.front();
    for (size_t i = 0; i < u.ops.size(); ++i) {
      if (u.states[i] == State::Waiting && (!first || u.ops[i].postedAt < *first)) {
        first = u.ops[i].postedAt;
      }
    }
  }
  if (!first) return std::nullopt;
  return *first + std::chrono::milliseconds(opTimeoutMs_);
}

void Communicator::checkDeadline(std::chrono::steady_clock::time_point now) {
  checkLate(now);
  auto d = timeoutDeadline();
  if (!d || now < *d) return;
  fail(Status{Code::Timeout, waitingFor() + " within " + std::to_string(opTimeoutMs_) + " ms"});
}

std::string Communicator::waitingFor() const {
  // The oldest waiting op names what it waits for.
  const PendingOp* oldest = nullptr;
  int owner = 0;
  for (size_t r = 0; r < queues_.size(); ++r) {
    if (queues_[r].empty()) continue;
    const Unit& u = queues_[r].front();
    for (size_t i = 0; i < u.ops.size(); ++i) {
      if (u.states[i] != State::Waiting) continue;
      if (oldest == nullptr || u.ops[i].postedAt < oldest->postedAt) {
        oldest = &u.ops[i];
        owner = static_cast<int>(r);
      }
    }
  }
  if (oldest == nullptr) return "an operation was not matched";
  const std::string what = describeOp(*oldest) + " of rank " + std::to_string(owner);
  if (oldest->type == OpType::Send) {
    return what + ": rank " + std::to_string(oldest->root) + " did not post the matching receive";
  }
  if (oldest->type == OpType::Recv) {
    return what + ": rank " + std::to_string(oldest->root) + " did not post the matching send";
  }
  std::string missing;
  auto it = collectives_.find(oldest->seq);
  for (size_t r = 0; r < members_.size(); ++r) {
    if (remote_[r]) continue;
    if (it != collectives_.end() && it->second.size() > r && it->second[r].has_value()) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return "op " + std::to_string(oldest->seq) + " (" + what + "): ranks " + missing +
         " did not post it";
}

}  // namespace hc::session
