#include "daemon/session/comm_shrinker.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

#include "daemon/session/comm_keys.h"
#include "daemon/session/validate.h"

namespace hc::session {
namespace {

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s.empty() ? "none" : s;
}

bool excluded(const std::vector<int>& exclude, int rank) {
  return std::binary_search(exclude.begin(), exclude.end(), rank);
}

}  // namespace

void CommShrinker::shrink(const SessionPtr& session, const ipc::SubmitEntry& e,
                          const std::shared_ptr<Communicator>& parent, int rank) {
  if ((e.flags & ipc::kEntryGroupMore) != 0 || (e.shrinkFlags & ~ipc::kKnownShrinkFlags) != 0) {
    session->complete(e.requestId,
                      invalidArgument("comm shrink: unknown flags, or inside a group"));
    return;
  }
  auto exclude = readExcludeList(e, *session, parent->nranks(), rank);
  if (!exclude.isOk()) {
    session->complete(e.requestId, exclude.status());
    return;
  }
  auto [it, fresh] = pending_.try_emplace(parent->id());
  Pending& p = it->second;
  if (fresh) {
    p.parent = parent;
    p.exclude = *exclude;
    p.flags = e.shrinkFlags;
    p.timeoutMs = e.timeoutMs > 0 ? e.timeoutMs : context_.options.initTimeoutMs;
    p.deadline = Clock::now() + std::chrono::milliseconds(p.timeoutMs);
    p.firstRank = rank;
  }
  if (!p.failure.isOk()) {
    session->complete(e.requestId, p.failure);
    return;
  }
  if (p.callers.contains(rank)) {
    session->complete(e.requestId, invalidArgument("comm shrink: rank " + std::to_string(rank) +
                                                   " is shrinking this communicator already"));
    return;
  }
  p.callers[rank] = Caller{session, e.requestId};
  if (*exclude != p.exclude || e.shrinkFlags != p.flags) {
    // Every survivor hears the same words, whichever list came first.
    const std::string what = *exclude != p.exclude ? "exclude lists" : "flags";
    return fail(
        p, invalidArgument("comm shrink: the survivors' " + what + " differ: rank " +
                           std::to_string(rank) + " excludes " + rankList(*exclude) + " (flags " +
                           std::to_string(e.shrinkFlags) + "), rank " +
                           std::to_string(p.firstRank) + " excludes " + rankList(p.exclude) +
                           " (flags " + std::to_string(p.flags) + ")"));
  }
  if ((e.shrinkFlags & ipc::kShrinkAbort) != 0 && !parent->failed()) {
    // NCCL_SHRINK_ABORT: the parent's outstanding operations stop here and, through the
    // failure notice, on its other daemons.
    parent->fail(Status{Code::Unavailable, "rank " + std::to_string(rank) +
                                               " shrank the communicator with "
                                               "NCCL_SHRINK_ABORT: its operations were stopped"});
    net_.notifyIfFailed(parent);
  }
  advance(parent->id());
}

void CommShrinker::revoke(const SessionPtr& session, const ipc::SubmitEntry& e,
                          const std::shared_ptr<Communicator>& parent, int rank) {
  if ((e.flags & ipc::kEntryGroupMore) != 0 || e.shrinkFlags != 0) {
    session->complete(e.requestId, invalidArgument("comm revoke: flags must be 0 "
                                                   "(NCCL_REVOKE_DEFAULT), outside a group"));
    return;
  }
  if (!parent->failed()) {
    parent->fail(
        Status{Code::Unavailable, "rank " + std::to_string(rank) + " revoked the communicator"});
    spdlog::info("communicator {:x}: revoked by rank {}", parent->id(), rank);
  }
  net_.notifyIfFailed(parent);
  session->complete(e.requestId, okStatus());
}

void CommShrinker::advance(uint64_t parentId) {
  auto it = pending_.find(parentId);
  if (it == pending_.end() || !it->second.failure.isOk()) return;
  Pending& p = it->second;
  const Communicator& parent = *p.parent;
  std::vector<int> survivors;
  bool allHere = true;
  for (int r = 0; r < parent.nranks(); ++r) {
    if (excluded(p.exclude, r)) continue;
    survivors.push_back(r);
    if (parent.isRemote(r)) {
      allHere = false;
      continue;
    }
    if (p.callers.contains(r)) continue;
    if (parent.member(r) == nullptr) {
      fail(p,
           invalidArgument("comm shrink: rank " + std::to_string(r) +
                           " left, but the exclude list (" + rankList(p.exclude) + ") keeps it"));
      pending_.erase(it);  // every survivor here heard it: a corrected call starts afresh
      return;
    }
    return;  // a local survivor has yet to call
  }
  if ((p.flags & ipc::kShrinkAbort) == 0) {
    std::string busy;
    if (!p.parent->idle(&busy)) {
      fail(p, invalidArgument("comm shrink: the communicator is not idle (" + busy +
                              "); finish its operations first or shrink with "
                              "NCCL_SHRINK_ABORT"));
      pending_.erase(it);
      return;
    }
  }
  const uint32_t generation = ++generations_[parentId];
  const std::string keyHex = shrinkKeyHex(parent.keyHex(), generation);
  auto layout = net_.layoutOf(parentId);
  if (allHere || layout == nullptr) {
    formHere(p, survivors, keyHex);
  } else {
    joinAtRoot(p, survivors, keyHex, *layout);
  }
  pending_.erase(it);
}

void CommShrinker::formHere(Pending& p, const std::vector<int>& survivors,
                            const std::string& keyHex) {
  const int n = static_cast<int>(survivors.size());
  auto child =
      std::make_shared<Communicator>(context_.nextCommId++, n, context_.options.opTimeoutMs);
  for (int c = 0; c < n; ++c) {
    const Caller& caller = p.callers.at(survivors[c]);
    child->setMember(c, caller.session.get());
  }
  context_.comms[child->id()] = child;
  context_.observer.observe(child, keyHex);
  for (int c = 0; c < n; ++c) {
    const Caller& caller = p.callers.at(survivors[c]);
    const uint64_t handle = caller.session->addMember(Member{child, c});
    caller.session->complete(caller.requestId, okStatus(), handle, c, n);
    caller.session->flushCompletions();
  }
  spdlog::info("communicator {:x} shrunk from {:x}: {} ranks excluded ({}), {} local ranks",
               child->id(), p.parent->id(), p.exclude.size(), rankList(p.exclude), n);
}

void CommShrinker::joinAtRoot(Pending& p, const std::vector<int>& survivors,
                              const std::string& keyHex, const coll::hier::NodeLayout& layout) {
  // The daemon of the lowest survivor roots the child, whichever daemon rooted the parent.
  const uint32_t rootNode = layout.nodeOfRank[static_cast<size_t>(survivors.front())];
  const auto& recorder = p.parent->recorder();
  if (recorder == nullptr || rootNode >= recorder->identity().nodeAddresses.size()) {
    return fail(p, internalError("comm shrink: the parent's daemon addresses are unknown here"));
  }
  const std::string root = recorder->identity().nodeAddresses[rootNode];
  const uint64_t agreement = stableDigest(rankList(p.exclude) + "/" + std::to_string(p.flags)) | 1;
  const peer::CommKey key = shrinkJoinKey(keyHex);
  const int n = static_cast<int>(survivors.size());
  spdlog::info("communicator {:x}: {} survivors ({} excluded: {}) form its child at {}",
               p.parent->id(), n, p.exclude.size(), rankList(p.exclude), root);
  for (const auto& [rank, caller] : p.callers) {
    const int childRank = static_cast<int>(
        std::lower_bound(survivors.begin(), survivors.end(), rank) - survivors.begin());
    joiner_.joinAt(caller.session, caller.requestId, key, n, childRank, p.timeoutMs, root,
                   agreement,
                   // Lists that name another lowest survivor meet at another root.
                   "comm shrink (do all survivors exclude the same ranks?): ");
  }
}

void CommShrinker::fail(Pending& p, const Status& why) {
  spdlog::warn("communicator {:x}: {}", p.parent->id(), why.message());
  for (auto& [rank, caller] : p.callers) {
    caller.session->complete(caller.requestId, why);
    caller.session->flushCompletions();
  }
  p.callers.clear();
  p.failure = why;
}

void CommShrinker::sessionClosed(const SessionPtr& session) {
  std::vector<uint64_t> touched;
  for (auto& [id, p] : pending_) {
    if (std::erase_if(p.callers, [&](const auto& c) { return c.second.session == session; }) > 0 ||
        p.failure.isOk()) {
      touched.push_back(id);
    }
  }
  for (uint64_t id : touched) advance(id);
}

void CommShrinker::failLate(Clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (p.deadline > now) {
      ++it;
      continue;
    }
    if (p.failure.isOk()) {
      std::vector<int> missing;
      for (int r = 0; r < p.parent->nranks(); ++r) {
        if (!p.parent->isRemote(r) && !excluded(p.exclude, r) && !p.callers.contains(r)) {
          missing.push_back(r);
        }
      }
      fail(p, Status{Code::Timeout, "comm shrink: ranks " + rankList(missing) +
                                        " of this daemon did not call shrink within " +
                                        std::to_string(p.timeoutMs) + " ms"});
    }
    it = pending_.erase(it);
  }
}

std::optional<CommShrinker::Clock::time_point> CommShrinker::nextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, p] : pending_) {
    if (!next || p.deadline < *next) next = p.deadline;
  }
  return next;
}

void CommShrinker::failAll(const Status& why) {
  for (auto& [id, p] : pending_) {
    if (p.failure.isOk()) fail(p, why);
  }
  pending_.clear();
}

}  // namespace hc::session
