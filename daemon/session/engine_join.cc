// The engine's multi-node joins: each local rank joins at the root daemon on its own
// (Bootstrap); the communicator forms once every local rank has the rank table, and spans the
// daemons the table names (engine_net.cc runs its operations).
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/session/engine.h"

namespace hc::session {
namespace {

using Clock = std::chrono::steady_clock;

peer::CommKey keyBytes(const uint8_t (&key)[16]) {
  peer::CommKey k;
  std::memcpy(k.data(), key, k.size());
  return k;
}

}  // namespace

int Engine::netDoneFd() const {
  return multiNode_.enabled() ? multiNode_.executor->doneFd() : -1;
}

void Engine::joinRemote(const SessionPtr& session, const ipc::SubmitEntry& e, std::string root) {
  const std::string key = commKeyHex(e.key);
  if (!multiNode_.enabled()) {
    session->complete(e.requestId,
                      unavailable("comm init: the unique id names root daemon " + root +
                                  ", but this daemon has no Peer listener (peer.listen)"));
    return;
  }
  auto [it, fresh] = remoteInits_.try_emplace(key);
  RemoteInit& init = it->second;
  if (fresh) {
    init.root = root;
    init.nranks = e.nranks;
    init.key = keyBytes(e.key);
  }
  if (init.nranks != e.nranks || init.root != root || init.joined.count(e.rank) != 0) {
    session->complete(e.requestId,
                      invalidArgument("comm init: rank " + std::to_string(e.rank) +
                                      " disagrees with this daemon's other ranks of the "
                                      "communicator, or joined twice"));
    return;
  }
  init.joined[e.rank] = Joiner{session, e.requestId};

  peer::JoinRequest request;
  request.key = keyBytes(e.key);
  request.nranks = static_cast<uint32_t>(e.nranks);
  request.ranks = {static_cast<uint32_t>(e.rank)};
  request.node = multiNode_.identity;
  request.wireVersion = peer::wireVersion();
  const auto address = multiNode_.executor->address();
  request.transportAddress.assign(address.bytes.begin(), address.bytes.end());
  const int timeout = e.timeoutMs > 0 ? e.timeoutMs : options_.initTimeoutMs;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
  spdlog::debug("comm init {}: rank {} of {} joins at root {}", key, e.rank, e.nranks, root);
  multiNode_.bootstrap->join(root, std::move(request), deadline,
                             [this, key, rank = e.rank](Result<peer::RankTable> table) {
                               {
                                 std::lock_guard<std::mutex> lock(finishedMutex_);
                                 joinAnswers_.push_back(
                                     {key, rank, std::move(table),
                                      Clock::now() + options_.joinAnswerDelay});
                               }
                               uint64_t one = 1;
                               [[maybe_unused]] ssize_t n = ::write(doneFd_.get(), &one, 8);
                             });
}

void Engine::takeJoinAnswers() {
  {
    std::lock_guard<std::mutex> lock(finishedMutex_);
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

void Engine::onJoinAnswer(JoinAnswer answer) {
  auto it = remoteInits_.find(answer.key);
  if (it == remoteInits_.end()) return;  // failed already
  if (!answer.table.isOk()) return failRemoteInit(answer.key, answer.table.status());
  RemoteInit& init = it->second;
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

void Engine::failRemoteInit(const std::string& key, const Status& why) {
  auto it = remoteInits_.find(key);
  if (it == remoteInits_.end()) return;
  for (auto& [rank, j] : it->second.joined) j.session->complete(j.requestId, why);
  remoteInits_.erase(it);
}

void Engine::formAcrossNodes(const std::string& key, const peer::RankTable& table) {
  RemoteInit init = std::move(remoteInits_[key]);
  remoteInits_.erase(key);
  std::vector<std::vector<uint32_t>> ranksOfNode;
  uint32_t self = UINT32_MAX;
  for (uint32_t n = 0; n < table.nodes.size(); ++n) {
    ranksOfNode.push_back(table.nodes[n].ranks);
    if (table.nodes[n].identity == multiNode_.identity) self = n;
  }
  Result<coll::hier::NodeLayout> layout =
      self == UINT32_MAX ? internalError("comm init: this daemon is not in the rank table")
                         : coll::hier::NodeLayout::make(self, std::move(ranksOfNode));
  if (layout.isOk() && layout->localCount() != init.joined.size()) {
    layout = internalError("comm init: the rank table places " +
                           std::to_string(layout->localCount()) + " ranks here, " +
                           std::to_string(init.joined.size()) + " joined");
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
  auto made = makeSpanningComm(std::move(layout.value()), table.identity, std::move(nodes));
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
  observe(comm, key, std::move(addresses), std::move(ranks));
  for (int rank : init.lost) {
    comm->leave(rank, unavailable("rank " + std::to_string(rank) +
                                  ": its client went away during comm init"));
  }
  progress(comm);
}

Result<std::shared_ptr<Communicator>> Engine::makeSpanningComm(
    coll::hier::NodeLayout layout, uint64_t identity, std::vector<transport::PeerAddress> nodes) {
  // Claimed before anything is sent: from here on this daemon delivers the identity's messages
  // (those that came early were held for it) and refuses it to any other communicator.
  if (layout.nodes() >= 2) HC_RETURN_IF_ERROR(multiNode_.executor->identities().claim(identity));
  auto comm = std::make_shared<Communicator>(nextCommId_++, layout.nranks(), options_.opTimeoutMs);
  for (int r = 0; r < layout.nranks(); ++r) {
    if (!layout.isLocal(r)) comm->markRemote(r);
  }
  comms_[comm->id()] = comm;
  if (layout.nodes() < 2) return comm;  // every rank here: a plain local communicator
  NetComm& net = netComms_[comm->id()];
  net.layout = std::make_shared<const coll::hier::NodeLayout>(std::move(layout));
  net.identity = identity;
  net.nodes = std::move(nodes);
  watchNodes(comm, net);
  return comm;
}

}  // namespace hc::session
