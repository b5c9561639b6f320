#include "daemon/control/join_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

namespace hc::control {
namespace {

// "2, 5, 7" (at most kShown ranks, then "and N more").
std::string rankList(const std::vector<uint32_t>& ranks) {
  constexpr size_t kShown = 16;
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) text += " and " + std::to_string(ranks.size() - kShown) + " more";
  return text;
}

// The key's first 8 hex digits: enough to tell communicators apart in one log, and short enough
// that the ranks an error names still fit the 100 bytes a client's completion carries.
std::string commName(const peer::CommKey& key) {
  return "communicator " + peer::commKeyHex(key).substr(0, 8);
}

}  // namespace

JoinRegistry::JoinRegistry(JoinRegistryOptions options)
    : options_(options), timer_([this] { timerLoop(); }) {}

JoinRegistry::~JoinRegistry() { shutdown(); }

JoinTicket JoinRegistry::newTicket() {
  std::lock_guard<std::mutex> lock(mutex_);
  return nextTicket_++;
}

void JoinRegistry::add(JoinTicket ticket, peer::JoinRequest request, JoinDone done) {
  Settlements settlements;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    addLocked(ticket, std::move(request), std::move(done), settlements);
  }
  changed_.notify_all();
  settle(settlements);
}

void JoinRegistry::addLocked(JoinTicket ticket, peer::JoinRequest request, JoinDone done,
                             Settlements& out) {
  const Clock::time_point now = Clock::now();
  auto reject = [&](Status status) { out.emplace_back(std::move(done), std::move(status)); };
  if (stopping_) return reject(unavailable("the root daemon is shutting down"));
  const peer::CommKey key = request.key;
  if (Status late = lateJoinStatusLocked(key, now); !late.isOk()) return reject(std::move(late));

  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= options_.maxPendingComms) {
      return reject({Code::NoResource, "the root has " + std::to_string(pending_.size()) +
                                           " communicators forming; retry later"});
    }
    size_t& opened = openedBy_[request.node];
    if (opened >= options_.maxPendingCommsPerNode) {
      return reject({Code::NoResource, "node " + request.node.toString() + " has " +
                                           std::to_string(opened) +
                                           " communicators forming at this root, the most one "
                                           "node may open at once; retry later"});
    }
    ++opened;
    PendingComm comm;
    comm.nranks = request.nranks;
    comm.agreement = request.agreement;
    comm.opener = request.node;
    comm.opened = now;
    comm.deadline = Clock::time_point::max();
    it = pending_.emplace(key, std::move(comm)).first;
    spdlog::info("peer bootstrap: {} of {} ranks opened by node {}", commName(key), request.nranks,
                 request.node.toString());
  }
  PendingComm& comm = it->second;

  if (request.nranks != comm.nranks) {
    Status mismatch = invalidArgument(
        commName(key) + ": nranks mismatch: node " + request.node.toString() + " (ranks " +
        rankList(request.ranks) + ") says " + std::to_string(request.nranks) +
        ", the joins before it say " + std::to_string(comm.nranks));
    spdlog::warn("peer bootstrap: {}", mismatch.message());
    reject(mismatch);
    return failCommLocked(key, mismatch, out);
  }

  if (request.agreement != comm.agreement) {
    Status mismatch = invalidArgument(
        commName(key) + ": node " + request.node.toString() + " (ranks " + rankList(request.ranks) +
        ") joins with another exclude list than the joins before it: every survivor of a "
        "shrink must exclude the same ranks");
    spdlog::warn("peer bootstrap: {}", mismatch.message());
    reject(mismatch);
    return failCommLocked(key, mismatch, out);
  }

  // Checks first, changes after: a refused join leaves the communicator as it was. Which earlier
  // joins does this one replace? Those of the same node holding any of its ranks (a retry).
  std::vector<JoinTicket> replaced;
  for (uint32_t rank : request.ranks) {
    auto held = comm.holder.find(rank);
    if (held == comm.holder.end()) continue;
    const JoinTicket holder = held->second;
    const Participant& earlier = comm.participants.at(holder);
    if (earlier.request.node != request.node) {
      return reject(invalidArgument(commName(key) + ": duplicate rank " + std::to_string(rank) +
                                    ": node " + request.node.toString() +
                                    " brings it, but it already joined from node " +
                                    earlier.request.node.toString()));
    }
    if (std::find(replaced.begin(), replaced.end(), holder) == replaced.end()) {
      replaced.push_back(holder);
    }
  }
  if (auto node = comm.nodes.find(request.node);
      node != comm.nodes.end() && node->second.joins > replaced.size() &&
      node->second.transportAddress != request.transportAddress) {
    // Two daemons claim one identity, or one restarted while its ranks were joining.
    Status conflict = invalidArgument(
        commName(key) + ": node " + request.node.toString() + " joins ranks " +
        rankList(request.ranks) +
        " with a transport address other than that of its earlier joins (one node, one address)");
    spdlog::warn("peer bootstrap: {}", conflict.message());
    reject(conflict);
    return failCommLocked(key, conflict, out);
  }
  for (JoinTicket earlier : replaced) {
    auto p = comm.participants.find(earlier);
    out.emplace_back(
        std::move(p->second.done),
        unavailable(commName(key) + ": superseded by a newer join from node " +
                    request.node.toString() + " (ranks " + rankList(request.ranks) + ")"));
    removeParticipantLocked(comm, p);
  }

  auto timeout = request.timeout.count() == 0 ? options_.defaultTimeout
                                              : std::min(request.timeout, options_.maxTimeout);
  const Clock::time_point deadline = now + timeout;
  const bool earlier = deadline < comm.deadline;
  comm.deadline = std::min(comm.deadline, deadline);
  for (uint32_t rank : request.ranks) comm.holder[rank] = ticket;
  comm.joinedCount += request.ranks.size();
  PendingNode& node = comm.nodes[request.node];
  node.transportAddress = request.transportAddress;
  ++node.joins;
  HC_CHECK(ticket != 0);
  const bool fresh =
      comm.participants
          .try_emplace(ticket, Participant{ticket, std::move(request), std::move(done)})
          .second;
  HC_CHECK(fresh);

  if (comm.joinedCount == comm.nranks) return formCommLocked(key, out);
  if (earlier) timerWake_.notify_one();
}

Status JoinRegistry::lateJoinStatusLocked(const peer::CommKey& key, Clock::time_point now) {
  auto it = tombstones_.find(key);
  if (it == tombstones_.end()) return okStatus();
  if (it->second.expiry <= now) {
    tombstones_.erase(it);
    return okStatus();
  }
  const Status& failure = it->second.failure;
  if (failure.isOk()) {
    return invalidArgument(commName(key) +
                           " has already formed with all its ranks; this join is late or reuses "
                           "the unique id");
  }
  return {failure.code(), "this communicator already failed: " + failure.message()};
}

void JoinRegistry::removeParticipantLocked(
    PendingComm& comm, std::map<JoinTicket, Participant>::iterator participant) {
  const peer::JoinRequest& request = participant->second.request;
  for (uint32_t rank : request.ranks) comm.holder.erase(rank);
  comm.joinedCount -= request.ranks.size();
  auto node = comm.nodes.find(request.node);
  if (--node->second.joins == 0) comm.nodes.erase(node);
  comm.participants.erase(participant);
}

void JoinRegistry::failCommLocked(peer::CommKey key, const Status& failure, Settlements& out) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  for (auto& [ticket, p] : it->second.participants) out.emplace_back(std::move(p.done), failure);
  eraseLocked(it);
  rememberLocked(key, failure, Clock::now());
}

void JoinRegistry::formCommLocked(peer::CommKey key, Settlements& out) {
  auto it = pending_.find(key);
  PendingComm& comm = it->second;
  std::vector<const peer::JoinRequest*> joins;
  joins.reserve(comm.participants.size());
  for (const auto& [ticket, p] : comm.participants) joins.push_back(&p.request);
  Result<uint64_t> identity = peer::drawCommIdentity();
  if (!identity.isOk()) {
    for (auto& [ticket, p] : comm.participants)
      out.emplace_back(std::move(p.done), identity.status());
    eraseLocked(it);
    rememberLocked(key, identity.status(), Clock::now());
    return;
  }
  peer::RankTable table = peer::buildRankTable(comm.nranks, joins, identity.value());
  spdlog::info("peer bootstrap: {} formed: {} ranks on {} nodes", commName(key), comm.nranks,
               table.nodes.size());
  for (auto& [ticket, p] : comm.participants) out.emplace_back(std::move(p.done), table);
  eraseLocked(it);
  rememberLocked(key, okStatus(), Clock::now());
}

void JoinRegistry::rememberLocked(const peer::CommKey& key, Status failure, Clock::time_point now) {
  if (tombstones_.size() >= options_.maxTombstones) {
    std::erase_if(tombstones_, [&](const auto& entry) { return entry.second.expiry <= now; });
  }
  if (tombstones_.size() >= options_.maxTombstones) {
    auto oldest = std::min_element(tombstones_.begin(), tombstones_.end(), [](auto& a, auto& b) {
      return a.second.expiry < b.second.expiry;
    });
    tombstones_.erase(oldest);
  }
  tombstones_[key] = {std::move(failure), now + options_.tombstoneTtl};
}

void JoinRegistry::eraseLocked(std::map<peer::CommKey, PendingComm>::iterator it) {
  auto opened = openedBy_.find(it->second.opener);
  if (opened != openedBy_.end() && --opened->second == 0) openedBy_.erase(opened);
  pending_.erase(it);
}

bool JoinRegistry::withdraw(const peer::CommKey& key, JoinTicket ticket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return false;
    auto p = it->second.participants.find(ticket);
    if (p == it->second.participants.end()) return false;
    spdlog::info("peer bootstrap: {}: node {} withdrew its join of ranks {}", commName(key),
                 p->second.request.node.toString(), rankList(p->second.request.ranks));
    removeParticipantLocked(it->second, p);
    // The deadline stays as it was: it is still a promise made to the remaining joiners.
    if (it->second.participants.empty()) eraseLocked(it);
  }
  changed_.notify_all();
  return true;
}

void JoinRegistry::shutdown() {
  Settlements settlements;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    const Status failure = unavailable("the root daemon is shutting down");
    while (!pending_.empty()) failCommLocked(pending_.begin()->first, failure, settlements);
  }
  timerWake_.notify_all();
  changed_.notify_all();
  settle(settlements);
  std::call_once(timerJoined_, [this] { timer_.join(); });
}

Status JoinRegistry::deadlineFailure(const peer::CommKey& key, const PendingComm& comm,
                                     Clock::time_point now) {
  std::vector<uint32_t> missing;
  for (uint32_t rank = 0; rank < comm.nranks; ++rank) {
    if (!comm.holder.contains(rank)) missing.push_back(rank);
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - comm.opened);
  return {Code::Timeout, commName(key) + ": waiting for ranks " + rankList(missing) +
                             ": deadline exceeded after " + std::to_string(waited.count()) +
                             " ms (ranks joined: " + std::to_string(comm.joinedCount) + " of " +
                             std::to_string(comm.nranks) +
                             "; nodes joined: " + std::to_string(comm.nodes.size()) + ")"};
}

void JoinRegistry::timerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    std::vector<peer::CommKey> expired;
    Clock::time_point next = Clock::time_point::max();
    for (const auto& [key, comm] : pending_) {
      if (comm.deadline <= now) {
        expired.push_back(key);
      } else {
        next = std::min(next, comm.deadline);
      }
    }
    if (!expired.empty()) {
      Settlements settlements;
      for (const peer::CommKey& key : expired) {
        Status failure = deadlineFailure(key, pending_.at(key), now);
        spdlog::warn("peer bootstrap: {}", failure.message());
        failCommLocked(key, failure, settlements);
      }
      lock.unlock();
      changed_.notify_all();
      settle(settlements);
      lock.lock();
      continue;
    }
    // Sleeps until the next deadline; add() wakes it when a join brings an earlier one.
    if (next == Clock::time_point::max()) {
      timerWake_.wait(lock);
    } else {
      timerWake_.wait_until(lock, next);
    }
  }
}

void JoinRegistry::settle(Settlements& settlements) {
  for (auto& [done, result] : settlements) done(std::move(result));
  settlements.clear();
}

std::vector<uint32_t> JoinRegistry::joinedRanks(const peer::CommKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint32_t> ranks;
  auto it = pending_.find(key);
  if (it == pending_.end()) return ranks;
  for (const auto& [rank, ticket] : it->second.holder) ranks.push_back(rank);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

bool JoinRegistry::waitForJoinedCount(const peer::CommKey& key, size_t count,
                                      std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] {
    auto it = pending_.find(key);
    return (it == pending_.end() ? 0 : it->second.joinedCount) == count;
  });
}

}  // namespace hc::control
