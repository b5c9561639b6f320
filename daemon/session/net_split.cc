// NetRunner (net_runner.h): communicators that span daemons come into being here, on every daemon
// alike: those a CommJoiner formed from the root's rank table (formSpanning), and the children
// of a split across daemons, whose ranks' colors, keys and identity proposals the daemons
// allgather first.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "daemon/session/comm_keys.h"
#include "daemon/session/net_runner.h"
#include "daemon/session/net_seq.h"
#include "daemon/session/session.h"

namespace hc::session {
namespace {

// What each rank contributes to a split among daemons, in int32 words: its color and key, and an
// identity its daemon drew for the child it may found (the child takes the one of its lowest
// parent rank, so every daemon names the child alike, and no identity comes from the parent's).
constexpr size_t kSplitWords = 4;

}  // namespace

Result<std::shared_ptr<Communicator>> NetRunner::formSpanning(
    coll::hier::NodeLayout layout, uint64_t identity, std::vector<transport::PeerAddress> nodes) {
  // Claimed before anything is sent: from here on this daemon delivers the identity's messages
  // (those that came early were held for it) and refuses it to any other communicator.
  if (layout.nodes() >= 2) HC_RETURN_IF_ERROR(multiNode_.executor->identities().claim(identity));
  auto comm = std::make_shared<Communicator>(context_.nextCommId++, layout.nranks(),
                                             context_.options.opTimeoutMs);
  for (int r = 0; r < layout.nranks(); ++r) {
    if (!layout.isLocal(r)) comm->markRemote(r);
  }
  context_.comms[comm->id()] = comm;
  if (layout.nodes() < 2) return comm;  // every rank here: a plain local communicator
  NetComm& net = netComms_[comm->id()];
  net.layout = std::make_shared<const coll::hier::NodeLayout>(std::move(layout));
  net.identity = identity;
  net.nodes = std::move(nodes);
  watchNodes(comm, net);
  return comm;
}

std::shared_ptr<const coll::hier::NodeLayout> NetRunner::layoutOf(uint64_t commId) const {
  auto it = netComms_.find(commId);
  return it == netComms_.end() ? nullptr : it->second.layout;
}

void NetRunner::split(const std::shared_ptr<Communicator>& comm, const Match& match) {
  auto found = netComms_.find(comm->id());
  HC_CHECK(found != netComms_.end());
  const NetComm& net = found->second;
  // Every daemon learns every rank's (color, key, identity proposal) by an allgather among the
  // daemons, then makes the same children.
  const auto& layout = *net.layout;
  NetRun run;
  run.kind = NetRun::Kind::Split;
  run.comm = comm;
  run.layout = net.layout;
  run.notice.assign(static_cast<size_t>(layout.nranks()) * kSplitWords * sizeof(int32_t), 0);
  for (size_t i = 0; i < match.ops.size(); ++i) {
    Result<uint64_t> proposal = peer::drawCommIdentity();
    if (!proposal.isOk()) {
      comm->finishMatch(match, proposal.status());
      return;
    }
    int32_t words[kSplitWords] = {match.ops[i].splitColor, match.ops[i].splitKey};
    std::memcpy(&words[2], &proposal.value(), sizeof(uint64_t));
    const uint64_t slot = layout.slotOf(static_cast<uint32_t>(match.refs[i].rank), kSplitWords);
    std::memcpy(run.notice.data() + slot * sizeof(int32_t), words, sizeof(words));
  }
  coll::net::NetJob job;
  job.spec.kind = coll::net::NetOpKind::AllGather;
  job.spec.self = layout.self;
  job.spec.comm = net.identity;
  job.spec.seq = collectiveSeq(match.seq);
  job.spec.dtype = Dtype::Int32;
  for (const auto& ranks : layout.ranksOfNode) {
    job.spec.blockCounts.push_back(ranks.size() * kSplitWords);
  }
  job.spec.buffer = run.notice.data();
  job.spec.options = multiNode_.netOptions;
  job.nodes = net.nodes;
  run.match = match;
  submitNet(std::move(run), std::move(job));
}

void NetRunner::finishSplit(NetRun& run) {
  const auto& parent = *run.layout;
  const Match& match = run.match;
  auto parentNet = netComms_.find(run.comm->id());
  if (parentNet == netComms_.end()) {
    run.comm->finishMatch(match, unavailable("the communicator went away during the split"));
    return;
  }
  // color -> (key, parent rank); new ranks by key, ties by parent rank (NCCL's rule).
  std::map<int32_t, std::vector<std::pair<int32_t, uint32_t>>> byColor;
  // color -> the child's identity: the proposal of its lowest parent rank.
  std::map<int32_t, uint64_t> identityOfColor;
  for (uint32_t r = 0; r < static_cast<uint32_t>(parent.nranks()); ++r) {
    int32_t words[kSplitWords];
    std::memcpy(words, run.notice.data() + parent.slotOf(r, kSplitWords) * sizeof(int32_t),
                sizeof(words));
    if (words[0] == ipc::kSplitNoColor) continue;
    byColor[words[0]].emplace_back(words[1], r);
    uint64_t proposal;
    std::memcpy(&proposal, &words[2], sizeof(proposal));
    identityOfColor.try_emplace(words[0], proposal);  // ranks ascend: the first is the lowest
  }
  // Two children of one split share an identity, or one is taken here already, only by a broken
  // random source: the split fails as a whole before any child forms.
  std::set<uint64_t> distinct;
  for (const auto& [color, identity] : identityOfColor) {
    const bool here = std::any_of(match.ops.begin(), match.ops.end(),
                                  [c = color](const PendingOp& op) { return op.splitColor == c; });
    if (!distinct.insert(identity).second ||
        (here && multiNode_.executor->identities().lookup(identity) !=
                     coll::net::CommIdentities::Known::Unknown)) {
      const Status why = internalError("split: the identity drawn for color " +
                                       std::to_string(color) + " is taken; refusing the split");
      spdlog::error("communicator {:x}: {}", run.comm->id(), why.message());
      run.comm->finishMatch(match, why);
      return;
    }
  }
  std::vector<Communicator::OpResult> results(match.ops.size());
  for (auto& [color, members] : byColor) {
    std::sort(members.begin(), members.end());
    const int n = static_cast<int>(members.size());
    std::vector<int> childOf(parent.nranks(), -1);
    for (int c = 0; c < n; ++c) childOf[members[c].second] = c;
    // The child's nodes: the parent's nodes that hold members, in the parent's order.
    std::vector<std::vector<uint32_t>> ranksOfNode;
    std::vector<transport::PeerAddress> nodes;
    std::vector<std::string> peerAddresses;  // for the child's flight recorder
    const std::vector<std::string>* parentAddresses =
        run.comm->recorder() ? &run.comm->recorder()->identity().nodeAddresses : nullptr;
    uint32_t self = UINT32_MAX;
    for (uint32_t pn = 0; pn < parent.nodes(); ++pn) {
      std::vector<uint32_t> ranks;
      for (uint32_t r : parent.ranksOfNode[pn]) {
        if (childOf[r] >= 0) ranks.push_back(static_cast<uint32_t>(childOf[r]));
      }
      if (ranks.empty()) continue;
      std::sort(ranks.begin(), ranks.end());
      if (pn == parent.self) self = static_cast<uint32_t>(ranksOfNode.size());
      ranksOfNode.push_back(std::move(ranks));
      nodes.push_back(parentNet->second.nodes[pn]);
      if (parentAddresses && pn < parentAddresses->size()) {
        peerAddresses.push_back((*parentAddresses)[pn]);
      }
    }
    std::vector<std::vector<int>> recordedRanks;
    for (const auto& ranks : ranksOfNode) recordedRanks.emplace_back(ranks.begin(), ranks.end());
    if (self == UINT32_MAX) continue;  // no member here
    auto layout = coll::hier::NodeLayout::make(self, std::move(ranksOfNode));
    if (!layout.isOk()) {
      run.comm->finishMatch(match, layout.status());
      return;
    }
    const size_t childNodes = layout->nodes();
    auto made = formSpanning(std::move(layout.value()), identityOfColor[color], std::move(nodes));
    // Checked for every color before any child formed (below the byColor loop's start).
    HC_CHECK(made.isOk());
    std::shared_ptr<Communicator> child = std::move(made.value());
    for (size_t i = 0; i < match.ops.size(); ++i) {
      const int c = childOf[match.refs[i].rank];
      if (c < 0 || match.ops[i].splitColor != color) continue;
      const SessionPtr& s = match.ops[i].session;
      child->setMember(c, s.get());
      results[i] = {s->addMember(Member{child, c}), c, n};
    }
    context_.observer.observe(child, splitKeyHex(run.comm->keyHex(), match.seq, color),
                              identityOf(child->id()), std::move(peerAddresses),
                              std::move(recordedRanks));
    spdlog::info(
        "communicator {:x} split from {:x}: color {}, {} ranks over {} daemons, identity {:016x}",
        child->id(), run.comm->id(), color, n, childNodes, identityOfColor[color]);
  }
  run.comm->finishMatch(match, okStatus(), results);
}

}  // namespace hc::session
