#include "daemon/session/comm_joiner.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include <spdlog/spdlog.h>

#include "daemon/session/comm_keys.h"

namespace hc::session {
namespace {

peer::CommKey keyBytes(const uint8_t (&key)[16]) {
  peer::CommKey k;
  std::memcpy(k.data(), key, k.size());
  return k;
}

}  // namespace

void CommJoiner::join(const SessionPtr& session, const ipc::SubmitEntry& e) {
  if (e.nranks <= 0 || e.rank < 0 || e.rank >= e.nranks) {
    session->complete(e.requestId,
                      invalidArgument("comm init: rank " + std::to_string(e.rank) + " of " +
                                      std::to_string(e.nranks) + " ranks is out of range"));
    return;
  }
  if (static_cast<uint32_t>(e.nranks) > context_.options.maxRanks) {
    session->complete(e.requestId, invalidArgument("comm init: " + std::to_string(e.nranks) +
                                                   " ranks; this daemon allows at most " +
                                                   std::to_string(context_.options.maxRanks) +
                                                   " (session.max_ranks)"));
    return;
  }
  std::string key = commKeyHex(e.key);
  if (std::string root = session->takeCommRoot(e.key); !root.empty()) {
    return joinRemote(session, e, std::move(root));
  }
  auto [it, fresh] = inits_.try_emplace(key);
  PendingInit& init = it->second;
  if (fresh) {
    int timeout = e.timeoutMs > 0 ? e.timeoutMs : context_.options.initTimeoutMs;
    init.nranks = e.nranks;
    init.uid = session->peer().uid;
    init.deadline = Clock::now() + std::chrono::milliseconds(timeout);
  }
  // A key is a secret of its job only as long as no one else learns it: another user who does
  // may not take a rank of it (and with it the job's data).
  if (!context_.options.initAcrossUids && session->peer().uid != init.uid) {
    session->complete(e.requestId, Status{Code::PermissionDenied,
                                          "comm init: the communicator is being formed by uid " +
                                              std::to_string(init.uid) + "; uid " +
                                              std::to_string(session->peer().uid) +
                                              " may not join it (comm.init_across_uids)"});
    return;
  }
  if (init.nranks != e.nranks) {
    session->complete(e.requestId,
                      invalidArgument("comm init: rank " + std::to_string(e.rank) + " says " +
                                      std::to_string(e.nranks) + " ranks, others said " +
                                      std::to_string(init.nranks)));
    failInit(key, invalidArgument("comm init: ranks disagree on the number of ranks (" +
                                  std::to_string(init.nranks) + " vs " + std::to_string(e.nranks) +
                                  ")"));
    return;
  }
  if (init.joined.count(e.rank) != 0) {
    session->complete(e.requestId, invalidArgument("comm init: rank " + std::to_string(e.rank) +
                                                   " already joined this communicator"));
    return;
  }
  init.joined[e.rank] = JoinedRank{session, e.requestId, 0, (e.flags & ipc::kEntrySmallOps) != 0};
  if (static_cast<int>(init.joined.size()) < init.nranks) return;

  auto comm = std::make_shared<Communicator>(context_.nextCommId++, init.nranks,
                                             context_.options.opTimeoutMs);
  bool smallOps = true;
  for (auto& [rank, j] : init.joined) smallOps = smallOps && j.smallOps;
  if (smallOps) offerSmallArea(*comm, init.joined);
  for (auto& [rank, j] : init.joined) {
    comm->setMember(rank, j.session.get());
    uint64_t handle = j.session->addMember(Member{comm, rank});
    j.session->complete(j.requestId, okStatus(), handle);
  }
  spdlog::info("communicator {:x} formed: {} local ranks", comm->id(), init.nranks);
  context_.comms[comm->id()] = comm;
  context_.observer.observe(comm, key);
  inits_.erase(it);
}

void CommJoiner::offerSmallArea(Communicator& comm, const std::map<int, JoinedRank>& joined) {
  // One uid: the area is shared memory that every rank can write.
  const uid_t uid = joined.begin()->second.session->peer().uid;
  for (const auto& [rank, j] : joined) {
    if (j.session->peer().uid != uid) return;
  }
  if (comm.nranks() < 2 || comm.nranks() > ipc::kAreaMaxRanks) return;
  auto area = SmallArea::create(comm.nranks(), "hetero-comm-area");
  if (!area.isOk()) {
    // Every rank asks for it and none gets it: they all go through the daemon.
    spdlog::warn("communicator {:x}: no small-operation area: {}", comm.id(),
                 area.status().message());
    return;
  }
  comm.setSmallArea(std::move(*area));
}

void CommJoiner::failInit(const std::string& key, const Status& why) {
  auto it = inits_.find(key);
  if (it == inits_.end()) return;
  for (auto& [rank, j] : it->second.joined) j.session->complete(j.requestId, why);
  inits_.erase(it);
}

void CommJoiner::splitLocally(const std::shared_ptr<Communicator>& comm, const Match& match) {
  // New rank order: by key, ties by the parent rank (NCCL's rule).
  std::map<int, std::vector<std::tuple<int, int, size_t>>> byColor;  // color -> (key, rank, op)
  for (size_t i = 0; i < match.ops.size(); ++i) {
    const PendingOp& op = match.ops[i];
    if (op.splitColor == ipc::kSplitNoColor) continue;
    byColor[op.splitColor].emplace_back(op.splitKey, match.refs[i].rank, i);
  }
  std::vector<Communicator::OpResult> results(match.ops.size());
  for (auto& [color, members] : byColor) {
    std::sort(members.begin(), members.end());
    const int n = static_cast<int>(members.size());
    auto child =
        std::make_shared<Communicator>(context_.nextCommId++, n, context_.options.opTimeoutMs);
    for (int r = 0; r < n; ++r) {
      const size_t i = std::get<2>(members[r]);
      const SessionPtr& s = match.ops[i].session;
      child->setMember(r, s.get());
      results[i] = {s->addMember(Member{child, r}), r, n};
    }
    // A child of a communicator with an area gets one too: its ranks asked for it at init.
    if (comm->smallArea() && n >= 2) {
      auto area = SmallArea::create(n, "hetero-comm-area");
      if (area.isOk()) child->setSmallArea(std::move(*area));
    }
    context_.comms[child->id()] = child;
    context_.observer.observe(child, splitKeyHex(comm->keyHex(), match.seq, color));
    spdlog::info("communicator {:x} split from {:x}: color {}, {} local ranks", child->id(),
                 comm->id(), color, n);
  }
  comm->finishMatch(match, okStatus(), results);
}

void CommJoiner::joinRemote(const SessionPtr& session, const ipc::SubmitEntry& e,
                            std::string root) {
  joinAt(session, e.requestId, keyBytes(e.key), e.nranks, e.rank, e.timeoutMs, std::move(root), 0);
}

void CommJoiner::joinAt(const SessionPtr& session, uint64_t requestId, const peer::CommKey& key,
                        int nranks, int rank, int timeoutMs, std::string root, uint64_t agreement,
                        std::string timeoutHint) {
  const std::string keyHex = peer::commKeyHex(key);
  if (!context_.multiNode.enabled()) {
    session->complete(requestId,
                      unavailable("comm init: the unique id names root daemon " + root +
                                  ", but this daemon has no Peer listener (peer.listen)"));
    return;
  }
  auto [it, fresh] = remoteInits_.try_emplace(keyHex);
  RemoteInit& init = it->second;
  if (fresh) {
    init.root = root;
    init.nranks = nranks;
    init.key = key;
    init.timeoutHint = std::move(timeoutHint);
  }
  if (init.nranks != nranks || init.root != root || init.joined.count(rank) != 0) {
    session->complete(requestId, invalidArgument("comm init: rank " + std::to_string(rank) +
                                                 " disagrees with this daemon's other ranks of the "
                                                 "communicator, or joined twice"));
    return;
  }
  peer::JoinRequest request;
  request.key = key;
  request.nranks = static_cast<uint32_t>(nranks);
  request.ranks = {static_cast<uint32_t>(rank)};
  request.node = context_.multiNode.identity;
  request.wireVersion = peer::wireVersion();
  request.agreement = agreement;
  const auto address = context_.multiNode.executor->address();
  request.transportAddress.assign(address.bytes.begin(), address.bytes.end());
  const int timeout = timeoutMs > 0 ? timeoutMs : context_.options.initTimeoutMs;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
  spdlog::debug("comm init {}: rank {} of {} joins at root {}", keyHex, rank, nranks, root);
  // Recorded before the join starts: its answer is taken on this thread, after this returns.
  JoinedRank& joined = init.joined[rank] = JoinedRank{session, requestId};
  joined.join = context_.multiNode.bootstrap->join(
      root, std::move(request), deadline, [this, keyHex, rank](Result<peer::RankTable> table) {
        {
          std::lock_guard<std::mutex> lock(answersMutex_);
          joinAnswers_.push_back(
              {keyHex, rank, std::move(table), Clock::now() + context_.options.joinAnswerDelay});
        }
        context_.wake();
      });
}

void CommJoiner::takeJoinAnswers() {
  {
    std::lock_guard<std::mutex> lock(answersMutex_);
    for (auto& a : joinAnswers_) delayedAnswers_.push_back(std::move(a));
    joinAnswers_.clear();
  }
  const auto now = Clock::now();
  std::vector<JoinAnswer> ready;
  std::erase_if(delayedAnswers_, [&](JoinAnswer& a) {
    if (a.readyAt > now) return false;
    ready.push_back(std::move(a));
    return true;
  });
  for (auto& a : ready) onJoinAnswer(std::move(a));
}

void CommJoiner::onJoinAnswer(JoinAnswer answer) {
  auto it = remoteInits_.find(answer.key);
  if (it == remoteInits_.end()) return;  // failed already
  RemoteInit& init = it->second;
  if (!answer.table.isOk() && init.lost.contains(answer.rank)) {
    // A withdrawn join: that rank is gone from the root, the others still wait for it.
    init.lost.erase(answer.rank);
    init.joined.erase(answer.rank);
    init.answered.erase(answer.rank);
    if (init.joined.empty()) remoteInits_.erase(it);
    return;
  }
  if (!answer.table.isOk()) return failRemoteInit(answer.key, answer.table.status());
  init.answered[answer.rank] = std::move(answer.table.value());
  if (init.answered.size() < init.joined.size()) return;
  const peer::RankTable& table = init.answered.begin()->second;
  for (const auto& [rank, t] : init.answered) {
    if (!(t == table)) {
      return failRemoteInit(answer.key, internalError("comm init: the root sent different "
                                                      "rank tables to this daemon's ranks"));
    }
  }
  formAcrossNodes(answer.key, table);
}

void CommJoiner::failRemoteInit(const std::string& key, const Status& why) {
  auto it = remoteInits_.find(key);
  if (it == remoteInits_.end()) return;
  const Status told = why.code() == Code::Timeout && !it->second.timeoutHint.empty()
                          ? Status{why.code(), it->second.timeoutHint + why.message()}
                          : why;
  for (auto& [rank, j] : it->second.joined) j.session->complete(j.requestId, told);
  remoteInits_.erase(it);
}

void CommJoiner::formAcrossNodes(const std::string& key, const peer::RankTable& table) {
  RemoteInit init = std::move(remoteInits_[key]);
  remoteInits_.erase(key);
  std::vector<std::vector<uint32_t>> ranksOfNode;
  uint32_t self = UINT32_MAX;
  for (uint32_t n = 0; n < table.nodes.size(); ++n) {
    ranksOfNode.push_back(table.nodes[n].ranks);
    if (table.nodes[n].identity == context_.multiNode.identity) self = n;
  }
  Result<coll::hier::NodeLayout> layout =
      self == UINT32_MAX ? internalError("comm init: this daemon is not in the rank table")
                         : coll::hier::NodeLayout::make(self, std::move(ranksOfNode));
  if (layout.isOk() && layout->localCount() != init.joined.size()) {
    layout =
        internalError("comm init: the rank table places " + std::to_string(layout->localCount()) +
                      " ranks here, " + std::to_string(init.joined.size()) + " joined");
  }
  if (!layout.isOk()) {
    for (auto& [rank, j] : init.joined) j.session->complete(j.requestId, layout.status());
    return;
  }
  std::vector<transport::PeerAddress> nodes;
  for (const auto& node : table.nodes) {
    nodes.push_back(transport::PeerAddress{
        std::vector<uint8_t>(node.transportAddress.begin(), node.transportAddress.end())});
  }
  auto made = net_.formSpanning(std::move(layout.value()), table.identity, std::move(nodes));
  if (!made.isOk()) {
    spdlog::error("comm init {}: {}", key, made.status().message());
    for (auto& [rank, j] : init.joined) j.session->complete(j.requestId, made.status());
    return;
  }
  std::shared_ptr<Communicator> comm = std::move(made.value());
  for (auto& [rank, j] : init.joined) {
    comm->setMember(rank, j.session.get());
    uint64_t handle = j.session->addMember(Member{comm, rank});
    j.session->complete(j.requestId, okStatus(), handle);
    j.session->flushCompletions();
  }
  spdlog::info(
      "communicator {:x} formed across {} daemons: {} ranks, {} here (node {}), identity {:016x}",
      comm->id(), table.nodes.size(), init.nranks, init.joined.size(), self, table.identity);
  std::vector<std::string> addresses;
  std::vector<std::vector<int>> ranks;
  for (const auto& node : table.nodes) {
    addresses.push_back(node.identity.instance);
    ranks.emplace_back(node.ranks.begin(), node.ranks.end());
  }
  context_.observer.observe(comm, key, net_.identityOf(comm->id()), std::move(addresses),
                            std::move(ranks));
  for (int rank : init.lost) {
    comm->leave(rank, unavailable("rank " + std::to_string(rank) +
                                  ": its client went away during comm init"));
  }
  context_.progress(comm);
}

void CommJoiner::takeDelayedAnswers() {
  if (!delayedAnswers_.empty()) takeJoinAnswers();
}

void CommJoiner::sessionClosed(const SessionPtr& session) {
  std::vector<std::string> doomed;
  for (auto& [key, init] : inits_) {
    for (auto& [rank, j] : init.joined) {
      if (j.session == session) doomed.push_back(key);
    }
  }
  for (const auto& key : doomed) {
    failInit(key, unavailable("comm init: " + session->describe() +
                              " went away before every rank joined"));
  }
  // Joins at a root are withdrawn, so the root forgets the ranks. If a communicator formed
  // first, the answer still comes: the rank leaves it then.
  for (auto& [key, init] : remoteInits_) {
    for (auto& [rank, j] : init.joined) {
      if (j.session != session || !init.lost.insert(rank).second) continue;
      context_.multiNode.bootstrap->withdraw(j.join);
    }
  }
}

void CommJoiner::failLateJoins(Clock::time_point now) {
  std::vector<std::string> late;
  for (auto& [key, init] : inits_) {
    if (now >= init.deadline) late.push_back(key);
  }
  for (const auto& key : late) {
    const PendingInit& init = inits_[key];
    std::string missing;
    for (int r = 0; r < init.nranks; ++r) {
      if (init.joined.count(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    failInit(key, Status{Code::Timeout,
                         "comm init: ranks " + missing + " did not join before the deadline"});
  }
}

void CommJoiner::failAll(const Status& why) {
  std::vector<std::string> keys;
  for (auto& [key, init] : inits_) keys.push_back(key);
  for (const auto& key : keys) failInit(key, why);
  std::vector<std::string> remote;
  for (auto& [key, init] : remoteInits_) remote.push_back(key);
  for (const auto& key : remote) failRemoteInit(key, why);
}

std::optional<CommJoiner::Clock::time_point> CommJoiner::nextDeadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  for (const auto& [key, init] : inits_) consider(init.deadline);
  for (const auto& answer : delayedAnswers_) consider(answer.readyAt);
  return next;
}

}  // namespace hc::session
