// The engine's multi-node half: communicators whose ranks live on several daemons (joining and
// forming them: engine_join.cc). Their operations run as NodePlans: the local step here on the
// IPC thread, the inter-node step on the NetExecutor's progress thread.
//
// Failures cross daemons both ways. Every daemon of a communicator keeps a watch (a posted
// receive) on every other daemon: a failure notice arriving there, or the other daemon going
// away or falling silent, fails the communicator here. When the communicator fails here (a
// rank's client died or aborted, ranks disagreed, a deadline passed), this daemon stops its
// running inter-node work and sends the notice to every other daemon, so no rank anywhere waits
// on it. When every local rank destroyed its handle, a goodbye goes out instead: the other
// daemons treat that daemon's ranks as departed (only work that needs them fails, as with a
// local destroy) and end their watch on it.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/session/engine.h"
#include "daemon/session/net_seq.h"
#include "daemon/session/notices.h"
#include "daemon/session/validate.h"
#include "daemon/staging/slice_staging.h"

namespace hc::session {
namespace {

// What every daemon must agree on for one collective: the first 16 bytes, compared bitwise.
// sliceBytes is a proposal: a daemon whose operands need staging (device memory, or the client's
// own memory) asks for the pipeline in slices of its staging chunk; every daemon takes the
// smallest proposal, or none (slice_staging.h).
struct Descriptor {
  uint8_t type, dtype, redop, pad;
  int32_t root;
  uint64_t count;
  uint64_t sliceBytes;
};
static_assert(sizeof(Descriptor) == 24);
constexpr size_t kAgreedBytes = offsetof(Descriptor, sliceBytes);

bool needsStaging(const std::vector<PendingOp>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const PendingOp& op) {
    return op.sendRegion != nullptr || op.recvRegion != nullptr || op.sendRange.used() ||
           op.recvRange.used();
  });
}

std::string describe(const Descriptor& d) {
  PendingOp op;
  op.type = static_cast<ipc::OpType>(d.type);
  op.dtype = d.dtype;
  op.redop = d.redop;
  op.root = d.root;
  op.count = d.count;
  return describeOp(op);
}

// A notice's transfer with daemon `node`: a send of ours, or the watch's receive of theirs.
coll::net::NetJob noticeJob(coll::net::NetOpKind kind, uint32_t self, uint32_t node,
                            uint64_t identity, std::vector<uint8_t>& notice,
                            const std::vector<transport::PeerAddress>& nodes) {
  coll::net::NetJob job;
  job.spec.kind = kind;
  job.spec.self = self;
  job.spec.root = node;
  job.spec.comm = identity;
  job.spec.seq = kNoticeSeq;
  job.spec.dtype = 0;  // int8
  job.spec.count = notice.size();
  job.spec.buffer = notice.data();
  // The notice speaks for the communicator; one about this transfer would race it (a daemon
  // whose client aborted would seem to the others to have gone away).
  job.spec.failureNotices = false;
  job.nodes = nodes;
  return job;
}

// What each rank contributes to a split among daemons, in int32 words: its color and key, and an
// identity its daemon drew for the child it may found (the child takes the one of its lowest
// parent rank, so every daemon names the child alike, and no identity comes from the parent's).
constexpr size_t kSplitWords = 4;

}  // namespace

void Engine::runAcrossNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                            Match match) {
  const PendingOp& head = match.ops.front();
  if (isPointToPoint(head.type)) return transferAcrossNodes(comm, net, std::move(match));
  // Device memory the transport could take in place still stages for a collective: its
  // algorithms among daemons combine and copy on the CPU.
  const bool anyDirect = std::any_of(match.ops.begin(), match.ops.end(), [&](const PendingOp& op) {
    for (const DeviceRegionPtr* r : {&op.sendRegion, &op.recvRegion}) {
      if (*r != nullptr && multiNode_.direct.kindOf((*r)->device())) return true;
    }
    return false;
  });
  countStaging(match, anyDirect ? "collective_on_host" : "transport_host_only");
  NetRun run;
  run.comm = comm;
  run.match = std::move(match);
  run.layout = net.layout;
  // Ranks on other daemons may have posted another descriptor, which the local matching cannot
  // see; the daemons allgather theirs first (24 bytes each), so a mismatch fails every rank with
  // the same message instead of running two different schedules. The same exchange settles
  // whether the op runs as a pipeline of slices.
  const PendingOp& first = run.match.ops.front();
  const Descriptor mine{static_cast<uint8_t>(first.type),
                        first.dtype,
                        first.redop,
                        0,
                        first.root,
                        first.count,
                        needsStaging(run.match.ops) ? std::max<uint64_t>(
                                                          options_.stagingChunkBytes, 1)
                                                    : 0};
  run.kind = NetRun::Kind::Agree;
  exchange(net, std::move(run), &mine, sizeof(mine));
}

void Engine::exchange(const NetComm& net, NetRun run, const void* mine, size_t bytes) {
  run.notice.assign(net.nodes.size() * bytes, 0);
  std::memcpy(run.notice.data() + net.layout->self * bytes, mine, bytes);
  coll::net::NetJob job;
  job.spec.kind = coll::net::NetOpKind::AllGather;
  job.spec.self = net.layout->self;
  job.spec.comm = net.identity;
  job.spec.seq = collectiveSeq(run.match.seq) | kAgreeBit;
  job.spec.dtype = 0;  // int8
  job.spec.blockCounts.assign(net.nodes.size(), bytes);
  job.spec.buffer = run.notice.data();
  job.spec.options = multiNode_.netOptions;
  job.nodes = net.nodes;
  submitNet(std::move(run), std::move(job));
}

void Engine::onAgreement(NetRun run) {
  const auto& layout = *run.layout;
  auto net = netComms_.find(run.comm->id());
  std::vector<Descriptor> all(layout.nodes());
  std::memcpy(all.data(), run.notice.data(), all.size() * sizeof(Descriptor));
  for (uint32_t n = 1; n < all.size(); ++n) {
    if (std::memcmp(&all[n], &all[0], kAgreedBytes) == 0) continue;
    // The same words on every daemon: each has the same table.
    const Status why = invalidArgument(
        mismatchText("op " + std::to_string(run.match.seq), layout.ranksOfNode[0][0],
                     describe(all[0]), "posted", layout.ranksOfNode[n][0], describe(all[n]),
                     "posted"));
    spdlog::warn("communicator {:x}: {}", run.comm->id(), why.message());
    // Every daemon sees the same descriptors and fails with the same words: a notice from here
    // could reach another daemon before its own agreement ends, and give its ranks other words.
    if (net != netComms_.end()) net->second.notified = true;
    endNetRun(run, why);
    return;
  }
  if (net == netComms_.end()) {
    run.comm->finishMatch(run.match, unavailable("the communicator went away"));
    return;
  }
  if (run.comm->failed()) {
    // It failed here while the daemons agreed; the others abandon the op when they hear it, so
    // starting it would wait on them for ever.
    endNetRun(run, run.comm->failure());
    return;
  }
  uint64_t sliceBytes = 0;
  for (const auto& d : all) {
    if (d.sliceBytes != 0 && (sliceBytes == 0 || d.sliceBytes < sliceBytes)) {
      sliceBytes = d.sliceBytes;
    }
  }
  run.kind = NetRun::Kind::Op;
  const PendingOp& head = run.match.ops.front();
  if (sliceBytes != 0 && head.count != 0 && staging::sliceable(head.type)) {
    return startPipeline(net->second, std::move(run), sliceBytes);
  }
  // Host memory on every daemon: the op runs whole, on the clients' segments.
  coll::LocalOp lop{head.type, head.dtype, head.redop, head.root, head.count};
  auto plan = coll::hier::NodePlan::make(lop, layout, matchBuffers(run.match), &scratch_);
  if (!plan.isOk()) {
    run.comm->finishMatch(run.match, plan.status());
    run.comm->fail(plan.status());
    progress(run.comm);
    return;
  }
  run.plan = std::move(plan.value());
  startNetOp(net->second, std::move(run));
}

void Engine::startNetOp(const NetComm& net, NetRun run) {
  const PendingOp& head = run.match.ops.front();
  run.plan->before();
  coll::net::NetJob job;
  job.spec = run.plan->spec();
  job.spec.comm = net.identity;
  job.spec.options = multiNode_.netOptions;
  job.spec.memory = run.memory;
  if (run.stagedTransfer) {
    job.make = [plan = *run.stagedTransfer](const coll::net::NetOpSpec& spec) {
      return staging::makeStagedTransfer(spec, plan);
    };
  }
  if (isPointToPoint(head.type)) {
    const int me = run.match.refs.front().rank;
    const bool send = head.type == ipc::OpType::Send;
    job.spec.seq = transferSeq(static_cast<uint32_t>(send ? me : head.root),
                               static_cast<uint32_t>(send ? head.root : me), head.seq);
  } else {
    job.spec.seq = collectiveSeq(run.match.seq);
  }
  job.nodes = net.nodes;
  submitNet(std::move(run), std::move(job));
}

void Engine::splitAcrossNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                              const Match& match) {
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
  job.spec.dtype = 2;  // int32
  for (const auto& ranks : layout.ranksOfNode) {
    job.spec.blockCounts.push_back(ranks.size() * kSplitWords);
  }
  job.spec.buffer = run.notice.data();
  job.spec.options = multiNode_.netOptions;
  job.nodes = net.nodes;
  run.match = match;
  submitNet(std::move(run), std::move(job));
}

void Engine::finishSplitAcrossNodes(NetRun& run) {
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
  std::map<int32_t, uint64_t> identityOf;
  for (uint32_t r = 0; r < static_cast<uint32_t>(parent.nranks()); ++r) {
    int32_t words[kSplitWords];
    std::memcpy(words, run.notice.data() + parent.slotOf(r, kSplitWords) * sizeof(int32_t),
                sizeof(words));
    if (words[0] == ipc::kSplitNoColor) continue;
    byColor[words[0]].emplace_back(words[1], r);
    uint64_t proposal;
    std::memcpy(&proposal, &words[2], sizeof(proposal));
    identityOf.try_emplace(words[0], proposal);  // ranks ascend: the first is the lowest
  }
  // Two children of one split share an identity, or one is taken here already, only by a broken
  // random source: the split fails as a whole before any child forms.
  std::set<uint64_t> distinct;
  for (const auto& [color, identity] : identityOf) {
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
    auto made = makeSpanningComm(std::move(layout.value()), identityOf[color], std::move(nodes));
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
    observe(child, splitKeyHex(run.comm->keyHex(), match.seq, color), std::move(peerAddresses),
            std::move(recordedRanks));
    spdlog::info(
        "communicator {:x} split from {:x}: color {}, {} ranks over {} daemons, identity {:016x}",
        child->id(), run.comm->id(), color, n, childNodes, identityOf[color]);
  }
  run.comm->finishMatch(match, okStatus(), results);
}

void Engine::endNetRun(NetRun& run, const Status& status) {
  run.comm->finishMatch(run.match, status);
  for (auto& op : run.match.ops) op.session->flushCompletions();
  progress(run.comm);
}

Engine::NetRun& Engine::submitNet(NetRun run, coll::net::NetJob job) {
  job.id = nextRunId_++;
  if (run.kind != NetRun::Kind::Watch && run.kind != NetRun::Kind::Notice) ++netOpsRunning_;
  NetRun& live = netRuns_.emplace(job.id, std::move(run)).first->second;
  multiNode_.executor->submit(std::move(job));
  return live;
}

void Engine::watchNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net) {
  for (uint32_t n = 0; n < net.nodes.size(); ++n) {
    if (n == net.layout->self) continue;
    NetRun run;
    run.kind = NetRun::Kind::Watch;
    run.comm = comm;
    run.node = n;
    run.notice.assign(kNoticeBytes, 0);
    auto job = noticeJob(coll::net::NetOpKind::Recv, net.layout->self, n, net.identity, run.notice,
                         net.nodes);
    submitNet(std::move(run), std::move(job));
  }
}

void Engine::collectNet() {
  if (!multiNode_.enabled()) return;
  for (auto& result : multiNode_.executor->takeResults()) {
    auto it = netRuns_.find(result.id);
    if (it == netRuns_.end()) continue;
    NetRun run = std::move(it->second);
    netRuns_.erase(it);
    if (run.kind == NetRun::Kind::Watch) {
      onWatch(run, result.status);
      continue;
    }
    if (run.kind == NetRun::Kind::Notice || run.released) continue;
    --netOpsRunning_;
    if (run.kind == NetRun::Kind::Agree) {
      if (result.status.isOk()) {
        onAgreement(std::move(run));
      } else {
        endNetRun(run, result.status);
      }
      continue;
    }
    if (run.kind == NetRun::Kind::Split) {
      if (result.status.isOk()) {
        finishSplitAcrossNodes(run);
      } else {
        run.comm->finishMatch(run.match, result.status);
      }
      for (auto& op : run.match.ops) op.session->flushCompletions();
      progress(run.comm);
      continue;
    }
    if (run.kind == NetRun::Kind::Verdict) {
      onVerdict(std::move(run), result.status);
      continue;
    }
    if (run.pipeline != nullptr) {
      onSliceDone(std::move(run), result.status);
      continue;
    }
    Status s = result.status;
    if (s.isOk()) {
      run.plan->after();
      s = run.staged.stageOut(run.match.ops);
    } else {
      spdlog::warn("communicator {:x}: {} across daemons failed: {}", run.comm->id(),
                   opName(run.match.ops.front().type), s.message());
    }
    run.plan.reset();  // its scratch goes back to the pool
    endNetRun(run, s);
  }
  propagateFailures();
}

void Engine::onWatch(NetRun& run, const Status& status) {
  const auto& comm = run.comm;
  if (comm->failed() || comms_.count(comm->id()) == 0) return;  // over already
  auto net = netComms_.find(comm->id());
  std::string ranks;
  if (net != netComms_.end()) {
    for (uint32_t r : net->second.layout->ranksOfNode[run.node]) {
      ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    }
  }
  Status why = status;
  if (status.isOk() && noticeKind(run.notice) == kNoticeGoodbye) {
    if (net == netComms_.end()) return;
    const coll::hier::NodeLayout& layout = *net->second.layout;
    std::vector<bool> local(static_cast<size_t>(layout.nranks()), false);
    for (uint32_t r : layout.ranksOfNode[layout.self]) local[r] = true;
    auto goodbye = decodeGoodbye(run.notice, layout.ranksOfNode[run.node], local);
    if (goodbye.isOk()) {
      spdlog::info("communicator {:x}: ranks {} destroyed their handles on their daemon{}",
                   comm->id(), ranks,
                   goodbye->complete ? "" : " (its send counts did not fit one notice)");
      for (uint32_t r : layout.ranksOfNode[run.node]) {
        comm->depart(static_cast<int>(r), unavailable("destroyed its handle of the communicator"),
                     goodbye->counts);
      }
      progress(comm);
      return;
    }
    why = Status{Code::RemoteError,
                 "the daemon of ranks " + ranks + " said goodbye: " + goodbye.status().message()};
  } else if (status.isOk()) {
    why = Status{failureCode(run.notice), "the daemon of ranks " + ranks +
                                              " failed the communicator: " +
                                              failureText(run.notice)};
    // That daemon has failed already: it needs no notice back. Our inter-node work of the
    // communicator stops, as that daemon's did: a transfer with a rank there that never posted
    // its side would otherwise wait for ever.
    if (net != netComms_.end()) {
      net->second.notified = true;
      multiNode_.executor->abortComm(net->second.identity, why);
    }
  } else {
    // Only the transport says a daemon went away; a notice comes from one that is alive.
    why = Status{status.code(), "the daemon of ranks " + ranks + ": " + status.message()};
    if (status.code() == Code::Unavailable) peerLost(*comm, run.node);
  }
  spdlog::warn("communicator {:x}: {}", comm->id(), why.message());
  comm->fail(why);
  // That daemon went away or fell silent: what runs with it may never end (a send into a stopped
  // peer), so its callers hear the failure now. After a notice our ops end through their aborts
  // (above), each with the words of an op's own notice where one came first.
  if (!status.isOk()) releaseRuns(comm);
  progress(comm);
}

void Engine::propagateFailures() {
  for (auto& [id, net] : netComms_) {
    auto comm = comms_.find(id);
    if (comm == comms_.end() || !comm->second->failed()) continue;
    if (!net.notified) notifyNodes(comm->second, net);
  }
}

void Engine::releaseRuns(const std::shared_ptr<Communicator>& comm) {
  // Inter-node work with a stopped daemon may never end: a send into it waits for a receive that
  // never comes. Its callers hear the failure now; the job keeps the buffers (and the mappings
  // behind them) until the transport lets go, so a late arrival can only land in a buffer whose
  // contents an error left undefined.
  for (auto& [id, run] : netRuns_) {
    if (run.comm != comm || run.released) continue;
    if (run.kind == NetRun::Kind::Watch || run.kind == NetRun::Kind::Notice) continue;
    run.released = true;
    --netOpsRunning_;
    comm->finishMatch(run.match, comm->failure());
    for (auto& op : run.match.ops) op.session->flushCompletions();
  }
}

void Engine::notifyNodes(const std::shared_ptr<Communicator>& comm, NetComm& net) {
  net.notified = true;
  // First stop this communicator's inter-node work (running ops tell the daemons they exchange
  // with), then tell every other daemon, whatever it is doing.
  multiNode_.executor->abortComm(net.identity, comm->failure());
  const std::vector<uint8_t> notice = encodeFailureNotice(comm->failure());
  sendNotices(comm, net, [&](uint32_t) { return notice; });
}

void Engine::sendNotices(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                         const std::function<std::vector<uint8_t>(uint32_t node)>& noticeFor) {
  for (uint32_t n = 0; n < net.nodes.size(); ++n) {
    if (n == net.layout->self) continue;
    NetRun run;
    run.kind = NetRun::Kind::Notice;
    run.comm = comm;
    run.node = n;
    run.notice = noticeFor(n);
    auto job = noticeJob(coll::net::NetOpKind::Send, net.layout->self, n, net.identity, run.notice,
                         net.nodes);
    submitNet(std::move(run), std::move(job));
  }
}

void Engine::retireNet(const std::shared_ptr<Communicator>& comm) {
  auto it = netComms_.find(comm->id());
  if (it == netComms_.end()) return;
  if (comm->failed() && !it->second.notified) {
    notifyNodes(comm, it->second);
  } else if (!comm->failed()) {
    // Our watches end when the others say goodbye (or fail, or go away) in turn.
    // Each daemon hears how many sends our ranks posted to its ranks: its receives of them may
    // still be posted after we are gone.
    const coll::hier::NodeLayout& layout = *it->second.layout;
    const std::vector<Communicator::SentCount> sent = comm->sentCounts();
    sendNotices(comm, it->second, [&](uint32_t node) {
      std::vector<Communicator::SentCount> toNode;
      for (const auto& c : sent) {
        if (layout.nodeOfRank[c.dst] == node && layout.nodeOfRank[c.src] == layout.self) {
          toNode.push_back(c);
        }
      }
      return encodeGoodbye(toNode);
    });
  }
  // Its later messages are stale here: dropped and counted, never matched to another.
  multiNode_.executor->identities().retire(it->second.identity);
  netComms_.erase(it);
}

}  // namespace hc::session
