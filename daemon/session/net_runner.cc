// NetRunner (net_runner.h): operations of communicators whose ranks live on several daemons
// (joining and forming them: CommJoiner). Their operations run as NodePlans: the local step here
// on the IPC thread, the inter-node step on the NetExecutor's progress thread.
//
// Failures cross daemons both ways. Every daemon of a communicator keeps a watch (a posted
// receive) on every other daemon: a failure notice arriving there, or the other daemon going
// away or falling silent, fails the communicator here. When the communicator fails here (a
// rank's client died or aborted, ranks disagreed, a deadline passed), this daemon stops its
// running inter-node work and sends the notice to every other daemon, so no rank anywhere waits
// on it. When every local rank destroyed its handle, a goodbye goes out instead: the other
// daemons treat that daemon's ranks as departed (only work that needs them fails, as with a
// local destroy) and end their watch on it.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/session/local_runner.h"
#include "daemon/session/net_runner.h"
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

// A peer's descriptor is read from the network: its codes are checked before they are named.
std::string describe(const Descriptor& d) {
  const auto type = opTypeFrom(d.type);
  const auto dtype = dtypeFrom(d.dtype);
  const auto redop = redOpFrom(d.redop);
  if (!type || !dtype || !redop) {
    return "an unknown operation (codes " + std::to_string(d.type) + ", " +
           std::to_string(d.dtype) + ", " + std::to_string(d.redop) + ")";
  }
  PendingOp op;
  op.type = *type;
  op.dtype = *dtype;
  op.redop = *redop;
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
  job.spec.dtype = Dtype::Int8;
  job.spec.count = notice.size();
  job.spec.buffer = notice.data();
  // The notice speaks for the communicator; one about this transfer would race it (a daemon
  // whose client aborted would seem to the others to have gone away).
  job.spec.failureNotices = false;
  job.nodes = nodes;
  return job;
}

}  // namespace

NetRunner::NetRunner(EngineContext* context)
    : context_(*context),
      multiNode_(context->multiNode),
      transfers_({&multiNode_.direct, multiNode_.netOptions.chunkBytes,
                  context->options.stagingChunkBytes, context->options.metrics},
                 &context->staging, &context->copier) {}

uint64_t NetRunner::identityOf(uint64_t commId) const {
  auto net = netComms_.find(commId);
  return net == netComms_.end() ? 0 : net->second.identity;
}

int NetRunner::doneFd() const { return multiNode_.enabled() ? multiNode_.executor->doneFd() : -1; }

void NetRunner::run(const std::shared_ptr<Communicator>& comm, Match match) {
  auto net = netComms_.find(comm->id());
  HC_CHECK(net != netComms_.end());
  if (isPointToPoint(match.ops.front().type)) {
    return runTransfer(comm, net->second, std::move(match));
  }
  runCollective(comm, net->second, std::move(match));
}

void NetRunner::runCollective(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                              Match match) {
  // Device memory the transport could take in place still stages for a collective: its
  // algorithms among daemons combine and copy on the CPU.
  const bool anyDirect = std::any_of(match.ops.begin(), match.ops.end(), [&](const PendingOp& op) {
    for (const DeviceRegionPtr* r : {&op.sendRegion, &op.recvRegion}) {
      if (*r != nullptr && multiNode_.direct.kindOf((*r)->device())) return true;
    }
    return false;
  });
  context_.observer.countStaging(match, anyDirect ? "collective_on_host" : "transport_host_only");
  NetRun run;
  run.comm = comm;
  run.match = std::move(match);
  run.layout = net.layout;
  // Ranks on other daemons may have posted another descriptor, which the local matching cannot
  // see; the daemons allgather theirs first (24 bytes each), so a mismatch fails every rank with
  // the same message instead of running two different schedules. The same exchange settles
  // whether the op runs as a pipeline of slices.
  const PendingOp& first = run.match.ops.front();
  const Descriptor mine{
      static_cast<uint8_t>(first.type),
      static_cast<uint8_t>(first.dtype),
      static_cast<uint8_t>(first.redop),
      0,
      first.root,
      first.count,
      needsStaging(run.match.ops) ? std::max<uint64_t>(context_.options.stagingChunkBytes, 1) : 0};
  run.kind = NetRun::Kind::Agree;
  exchange(net, std::move(run), &mine, sizeof(mine));
}

void NetRunner::exchange(const NetComm& net, NetRun run, const void* mine, size_t bytes) {
  run.notice.assign(net.nodes.size() * bytes, 0);
  std::memcpy(run.notice.data() + net.layout->self * bytes, mine, bytes);
  coll::net::NetJob job;
  job.spec.kind = coll::net::NetOpKind::AllGather;
  job.spec.self = net.layout->self;
  job.spec.comm = net.identity;
  job.spec.seq = collectiveSeq(run.match.seq) | kAgreeBit;
  job.spec.dtype = Dtype::Int8;
  job.spec.blockCounts.assign(net.nodes.size(), bytes);
  job.spec.buffer = run.notice.data();
  job.spec.options = multiNode_.netOptions;
  job.nodes = net.nodes;
  submitNet(std::move(run), std::move(job));
}

void NetRunner::onAgreement(NetRun run) {
  const auto& layout = *run.layout;
  auto net = netComms_.find(run.comm->id());
  std::vector<Descriptor> all(layout.nodes());
  std::memcpy(all.data(), run.notice.data(), all.size() * sizeof(Descriptor));
  for (uint32_t n = 1; n < all.size(); ++n) {
    if (std::memcmp(&all[n], &all[0], kAgreedBytes) == 0) continue;
    // The same words on every daemon: each has the same table.
    const Status why = invalidArgument(mismatchText(
        "op " + std::to_string(run.match.seq), layout.ranksOfNode[0][0], describe(all[0]), "posted",
        layout.ranksOfNode[n][0], describe(all[n]), "posted"));
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
  if (!plan.isOk()) return failBeforeWire(run.comm, run.match, plan.status());
  run.plan = std::move(plan.value());
  startNetOp(net->second, std::move(run));
}

void NetRunner::startNetOp(const NetComm& net, NetRun run) {
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
    const bool send = head.type == OpType::Send;
    job.spec.seq = transferSeq(static_cast<uint32_t>(send ? me : head.root),
                               static_cast<uint32_t>(send ? head.root : me), head.seq);
  } else {
    job.spec.seq = collectiveSeq(run.match.seq);
  }
  job.nodes = net.nodes;
  submitNet(std::move(run), std::move(job));
}

void NetRunner::failBeforeWire(const std::shared_ptr<Communicator>& comm, const Match& match,
                               const Status& why) {
  comm->finishMatch(match, why);
  comm->fail(why);
  context_.progress(comm);
}

void NetRunner::endNetRun(NetRun& run, const Status& status) {
  run.comm->finishMatch(run.match, status);
  for (auto& op : run.match.ops) op.session->flushCompletions();
  context_.progress(run.comm);
}

NetRunner::NetRun& NetRunner::submitNet(NetRun run, coll::net::NetJob job) {
  job.id = context_.nextRunId++;
  if (run.kind != NetRun::Kind::Watch && run.kind != NetRun::Kind::Notice) ++netOpsRunning_;
  NetRun& live = netRuns_.emplace(job.id, std::move(run)).first->second;
  multiNode_.executor->submit(std::move(job));
  return live;
}

void NetRunner::watchNodes(const std::shared_ptr<Communicator>& comm, const NetComm& net) {
  // A watch is a receive posted for the notice the other daemon may send.
  noticeRuns(comm, net, NetRun::Kind::Watch,
             [](uint32_t) { return std::vector<uint8_t>(kNoticeBytes, 0); });
}

void NetRunner::collect() {
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
        finishSplit(run);
      } else {
        run.comm->finishMatch(run.match, result.status);
      }
      for (auto& op : run.match.ops) op.session->flushCompletions();
      context_.progress(run.comm);
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

void NetRunner::onWatch(NetRun& run, const Status& status) {
  const auto& comm = run.comm;
  if (comm->failed() || context_.comms.count(comm->id()) == 0) return;  // over already
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
      context_.progress(comm);
      return;
    }
    why = Status{Code::RemoteError,
                 "the daemon of ranks " + ranks + " said goodbye: " + goodbye.status().message()};
  } else if (status.isOk()) {
    why =
        Status{failureCode(run.notice), "the daemon of ranks " + ranks +
                                            " failed the communicator: " + failureText(run.notice)};
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
    if (status.code() == Code::Unavailable) context_.observer.peerLost(*comm, run.node);
  }
  spdlog::warn("communicator {:x}: {}", comm->id(), why.message());
  comm->fail(why);
  // That daemon went away or fell silent: what runs with it may never end (a send into a stopped
  // peer), so its callers hear the failure now. After a notice our ops end through their aborts
  // (above), each with the words of an op's own notice where one came first.
  if (!status.isOk()) releaseRuns(comm);
  context_.progress(comm);
}

void NetRunner::notifyIfFailed(const std::shared_ptr<Communicator>& comm) {
  if (!comm->failed()) return;
  if (auto net = netComms_.find(comm->id()); net != netComms_.end()) {
    if (!net->second.notified) notifyNodes(comm, net->second);
  }
}

void NetRunner::propagateFailures() {
  for (auto& [id, net] : netComms_) {
    auto comm = context_.comms.find(id);
    if (comm == context_.comms.end() || !comm->second->failed()) continue;
    if (!net.notified) notifyNodes(comm->second, net);
  }
}

void NetRunner::releaseRuns(const std::shared_ptr<Communicator>& comm) {
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

void NetRunner::notifyNodes(const std::shared_ptr<Communicator>& comm, NetComm& net) {
  net.notified = true;
  // First stop this communicator's inter-node work (running ops tell the daemons they exchange
  // with), then tell every other daemon, whatever it is doing.
  multiNode_.executor->abortComm(net.identity, comm->failure());
  const std::vector<uint8_t> notice = encodeFailureNotice(comm->failure());
  sendNotices(comm, net, [&](uint32_t) { return notice; });
}

void NetRunner::sendNotices(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                            const std::function<std::vector<uint8_t>(uint32_t node)>& noticeFor) {
  noticeRuns(comm, net, NetRun::Kind::Notice, noticeFor);
}

void NetRunner::noticeRuns(const std::shared_ptr<Communicator>& comm, const NetComm& net,
                           NetRun::Kind kind,
                           const std::function<std::vector<uint8_t>(uint32_t node)>& noticeFor) {
  const auto op =
      kind == NetRun::Kind::Watch ? coll::net::NetOpKind::Recv : coll::net::NetOpKind::Send;
  for (uint32_t n = 0; n < net.nodes.size(); ++n) {
    if (n == net.layout->self) continue;
    NetRun run;
    run.kind = kind;
    run.comm = comm;
    run.node = n;
    run.notice = noticeFor(n);
    auto job = noticeJob(op, net.layout->self, n, net.identity, run.notice, net.nodes);
    submitNet(std::move(run), std::move(job));
  }
}

void NetRunner::retire(const std::shared_ptr<Communicator>& comm) {
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
