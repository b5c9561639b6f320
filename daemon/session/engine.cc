#include "daemon/session/engine.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include <spdlog/spdlog.h>

#include "daemon/coll/reduce.h"
#include "daemon/session/validate.h"
#include "daemon/staging/device_reduce.h"

namespace hc::session {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::string commKeyHex(const uint8_t (&key)[16]) {
  peer::CommKey k;
  std::memcpy(k.data(), key, k.size());
  return peer::commKeyHex(k);
}

Engine::Engine(EngineOptions options, coll::ReductionPool* pool, MultiNode multiNode)
    : options_(options),
      pool_(pool),
      doneFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      staging_(256ull << 20, options.maxStagingBytes),
      copier_(options.stagingChunkBytes),
      multiNode_(std::move(multiNode)),
      transfers_({&multiNode_.direct, multiNode_.netOptions.chunkBytes, options.stagingChunkBytes,
                  options.metrics},
                 &staging_, &copier_) {
  HC_CHECK(doneFd_.valid());
}

Engine::~Engine() = default;

bool Engine::accepting(const Session& session) const {
  // Completions the client has not made room for count too: a client that never reads them
  // cannot make the daemon hold more.
  if (session.parkedCompletions() >= options_.maxInFlight) return false;
  if (session.inFlight < options_.maxInFlight) return true;
  return !session.openGroups.empty() && session.inFlight < options_.maxInFlight + ipc::kMaxGroupOps;
}

Result<bool> Engine::drain(const SessionPtr& session, uint32_t budget) {
  bool took = false;
  ipc::SubmitEntry e;
  for (uint32_t taken = 0; taken < budget && accepting(*session); ++taken) {
    ipc::PopResult r = session->popSubmission(&e);
    if (r == ipc::PopResult::Empty) break;
    if (r == ipc::PopResult::Corrupt) return invalidArgument("submission ring is corrupt");
    took = true;
    ++session->inFlight;
    accept(session, e);
  }
  session->flushCompletions();
  return took;
}

void Engine::accept(const SessionPtr& session, const ipc::SubmitEntry& e) {
  if (e.doneFlag != 0) {
    // Tracked before anything can complete the entry, so its stream is released on every path.
    if (Status s = session->trackDoneFlag(e.requestId, e.doneFlag); !s.isOk()) {
      session->complete(e.requestId, s);
      return;
    }
  }
  if (e.op == 0 || e.op >= ipc::kNumOpTypes) {
    session->complete(e.requestId, invalidArgument("unknown operation " + std::to_string(e.op)));
    return;
  }
  auto type = static_cast<ipc::OpType>(e.op);
  if (type == ipc::OpType::CommInit) return join(session, e);
  Member* m = session->member(e.commHandle);
  if (m == nullptr) {
    session->complete(e.requestId,
                      notFound("unknown communicator handle " + std::to_string(e.commHandle)));
    return;
  }
  auto comm = m->comm;
  if (type == ipc::OpType::CommDestroy) {
    comm->depart(m->rank, unavailable("destroyed its handle of the communicator"));
    session->removeMember(e.commHandle);
    session->closeGroup(e.commHandle);
    session->complete(e.requestId, okStatus());
    dropIfEmpty(comm);
    return;
  }
  const bool closesUnit = (e.flags & ipc::kEntryGroupMore) == 0;
  if (closesUnit) {
    session->closeGroup(e.commHandle);
  } else if (session->openGroupOps >= ipc::kMaxGroupOps) {
    // The group ends here, failed: every op of it completes with the error now.
    session->closeGroup(e.commHandle);
    comm->reject(m->rank, session, e.requestId,
                 invalidArgument("a group holds more than " + std::to_string(ipc::kMaxGroupOps) +
                                 " operations (on all of this client's communicators)"),
                 /*closesUnit=*/true);
    progress(comm);
    return;
  } else {
    ++session->openGroups[e.commHandle];
    ++session->openGroupOps;
  }
  auto op = resolveOp(e, session, m->rank, comm->nranks());
  if (!op.isOk()) {
    comm->reject(m->rank, session, e.requestId, op.status(), closesUnit);
    return;
  }
  op->postedAt = Clock::now();
  comm->post(m->rank, std::move(op.value()), closesUnit);
  progress(comm);
}

void Engine::join(const SessionPtr& session, const ipc::SubmitEntry& e) {
  if (e.nranks <= 0 || e.rank < 0 || e.rank >= e.nranks) {
    session->complete(e.requestId, invalidArgument("comm init: rank " + std::to_string(e.rank) +
                                                   " of " + std::to_string(e.nranks) +
                                                   " ranks is out of range"));
    return;
  }
  if (static_cast<uint32_t>(e.nranks) > options_.maxRanks) {
    session->complete(e.requestId,
                      invalidArgument("comm init: " + std::to_string(e.nranks) +
                                      " ranks; this daemon allows at most " +
                                      std::to_string(options_.maxRanks) + " (session.max_ranks)"));
    return;
  }
  std::string key = commKeyHex(e.key);
  if (std::string root = session->takeCommRoot(e.key); !root.empty()) {
    return joinRemote(session, e, std::move(root));
  }
  auto [it, fresh] = inits_.try_emplace(key);
  PendingInit& init = it->second;
  if (fresh) {
    int timeout = e.timeoutMs > 0 ? e.timeoutMs : options_.initTimeoutMs;
    init.nranks = e.nranks;
    init.uid = session->peer().uid;
    init.deadline = Clock::now() + std::chrono::milliseconds(timeout);
  }
  // A key is a secret of its job only as long as no one else learns it: another user who does
  // may not take a rank of it (and with it the job's data).
  if (!options_.initAcrossUids && session->peer().uid != init.uid) {
    session->complete(e.requestId,
                      Status{Code::PermissionDenied,
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
                                  std::to_string(init.nranks) + " vs " +
                                  std::to_string(e.nranks) + ")"));
    return;
  }
  if (init.joined.count(e.rank) != 0) {
    session->complete(e.requestId, invalidArgument("comm init: rank " + std::to_string(e.rank) +
                                                   " already joined this communicator"));
    return;
  }
  init.joined[e.rank] = Joiner{session, e.requestId};
  if (static_cast<int>(init.joined.size()) < init.nranks) return;

  auto comm = std::make_shared<Communicator>(nextCommId_++, init.nranks, options_.opTimeoutMs);
  for (auto& [rank, j] : init.joined) {
    comm->setMember(rank, j.session.get());
    uint64_t handle = j.session->addMember(Member{comm, rank});
    j.session->complete(j.requestId, okStatus(), handle);
  }
  spdlog::info("communicator {:x} formed: {} local ranks", comm->id(), init.nranks);
  comms_[comm->id()] = comm;
  observe(comm, key);
  inits_.erase(it);
}

void Engine::failInit(const std::string& key, const Status& why) {
  auto it = inits_.find(key);
  if (it == inits_.end()) return;
  for (auto& [rank, j] : it->second.joined) j.session->complete(j.requestId, why);
  inits_.erase(it);
}

void Engine::progress(const std::shared_ptr<Communicator>& comm) {
  // Running a match inline can finish a unit and so match the next one: loop until quiet.
  for (auto matches = comm->takeMatches(); !matches.empty(); matches = comm->takeMatches()) {
    for (auto& m : matches) {
      if (m.ops.front().type == ipc::OpType::CommSplit) {
        split(comm, m);
      } else {
        run(comm, std::move(m));
      }
    }
  }
  if (comm->failed()) {
    if (auto net = netComms_.find(comm->id()); net != netComms_.end()) {
      if (!net->second.notified) notifyNodes(comm, net->second);
    }
  }
}

std::vector<coll::RankBuffers> Engine::matchBuffers(const Match& match) const {
  std::vector<coll::RankBuffers> bufs;
  for (const auto& op : match.ops) {
    coll::RankBuffers b = op.buffers;
    // A buffer-resident scalar is read when the operation runs, as NCCL reads a device scalar.
    if (op.scalarSource != nullptr) {
      b.scalar = 0;
      std::memcpy(&b.scalar, op.scalarSource, coll::dtypeSize(op.dtype));
    }
    bufs.push_back(b);
  }
  return bufs;
}

void Engine::run(const std::shared_ptr<Communicator>& comm, Match match) {
  const PendingOp& head = match.ops.front();
  if (auto net = netComms_.find(comm->id()); net != netComms_.end()) {
    // Everything but a transfer between two ranks of this daemon involves the others.
    if (!(isPointToPoint(head.type) && match.ops.size() == 2)) {
      return runAcrossNodes(comm, net->second, std::move(match));
    }
  }
  // Device operands that take the host path, and why: a home device without reduction kernels,
  // or anything the devices cannot reduce by themselves (device_reduce.h).
  const char* fallback = "host_reduction";
  // Only device operands can reduce on a device (the head's send side first of all): host
  // matches skip building the data path's view of the ops.
  std::vector<staging::Operand> operands;
  if (head.sendRegion != nullptr) operands = operandsOf(match);
  const staging::ReductionPlacement placement =
      operands.empty() ? staging::ReductionPlacement{} : staging::reductionPlacement(operands);
  if (placement.home != nullptr) {
    if (placement.home->capabilities().reduceKernels) {
      if (options_.metrics != nullptr) options_.metrics->deviceReduction(placement.spansDevices);
      comm->finishMatch(match, staging::reduceOnDevice(operands, placement, copier_));
      return;
    }
    fallback = "no_reduce_kernels";
  }
  // A transfer is planned as the sender's copy into the receiver's buffer.
  const ipc::OpType type = isPointToPoint(head.type) ? ipc::OpType::Send : head.type;
  coll::LocalOp lop{type, head.dtype, head.redop, head.root, head.count};
  std::vector<coll::RankBuffers> bufs = matchBuffers(match);
  StagedMatch staged;
  Status in = staged.stageIn(match.ops, bufs, &staging_, &copier_);
  countStaging(match, fallback);
  if (!in.isOk()) {
    comm->finishMatch(match, in);
    return;
  }
  auto plan = std::make_unique<coll::LocalPlan>(lop, std::move(bufs), options_.pieceBytes);
  if (pool_ == nullptr || plan->bytesMoved() <= options_.inlineBytes || plan->pieces() < 2) {
    for (size_t i = 0; i < plan->pieces(); ++i) plan->runPiece(i);
    comm->finishMatch(match, staged.stageOut(match.ops));
    return;
  }
  uint64_t id = nextRunId_++;
  coll::LocalPlan* raw = plan.get();
  running_[id] = Running{comm, std::move(match), std::move(plan), std::move(staged)};
  pool_->submit(
      raw->pieces(), [raw](size_t i) { raw->runPiece(i); },
      [this, id] {
        {
          std::lock_guard<std::mutex> lock(finishedMutex_);
          finished_.push_back(id);
        }
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(doneFd_.get(), &one, sizeof(one));
      });
}

void Engine::split(const std::shared_ptr<Communicator>& comm, const Match& match) {
  if (auto net = netComms_.find(comm->id()); net != netComms_.end()) {
    return splitAcrossNodes(comm, net->second, match);
  }
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
    auto child = std::make_shared<Communicator>(nextCommId_++, n, options_.opTimeoutMs);
    for (int r = 0; r < n; ++r) {
      const size_t i = std::get<2>(members[r]);
      const SessionPtr& s = match.ops[i].session;
      child->setMember(r, s.get());
      results[i] = {s->addMember(Member{child, r}), r, n};
    }
    comms_[child->id()] = child;
    observe(child, splitKeyHex(comm->keyHex(), match.seq, color));
    spdlog::info("communicator {:x} split from {:x}: color {}, {} local ranks", child->id(),
                 comm->id(), color, n);
  }
  comm->finishMatch(match, okStatus(), results);
}

void Engine::collectFinished() {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(doneFd_.get(), &count, sizeof(count));
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(finishedMutex_);
    ids.swap(finished_);
  }
  for (uint64_t id : ids) finish(id);
  takeJoinAnswers();
}

void Engine::finish(uint64_t runId) {
  auto it = running_.find(runId);
  if (it == running_.end()) return;
  auto comm = it->second.comm;
  comm->finishMatch(it->second.match, it->second.staged.stageOut(it->second.match.ops));
  for (auto& op : it->second.match.ops) op.session->flushCompletions();
  running_.erase(it);
  progress(comm);
}

void Engine::sessionClosed(const SessionPtr& session, const Status& why) {
  for (auto& [handle, m] : session->members()) {
    m.comm->leave(m.rank, Status{why.code(), "rank " + std::to_string(m.rank) + ": " +
                                                 why.message()});
  }
  session->members().clear();
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
  // Joins at a root cannot be withdrawn: the communicator forms, and the rank leaves it then.
  for (auto& [key, init] : remoteInits_) {
    for (auto& [rank, j] : init.joined) {
      if (j.session == session) init.lost.insert(rank);
    }
  }
  propagateFailures();
  std::vector<std::shared_ptr<Communicator>> empty;
  for (auto& [id, comm] : comms_) {
    if (!comm->hasMembers()) empty.push_back(comm);
  }
  for (const auto& comm : empty) dropIfEmpty(comm);
}

void Engine::abortHandle(const SessionPtr& session, uint64_t handle) {
  Member* m = session->member(handle);
  if (m == nullptr) return;
  auto comm = m->comm;
  comm->leave(m->rank,
              unavailable("rank " + std::to_string(m->rank) + " aborted the communicator"));
  session->removeMember(handle);
  session->closeGroup(handle);
  propagateFailures();
  dropIfEmpty(comm);
}

void Engine::dropIfEmpty(const std::shared_ptr<Communicator>& comm) {
  if (comm->hasMembers()) return;
  retireNet(comm);
  comms_.erase(comm->id());
  if (options_.board != nullptr) options_.board->commGone(comm->id());
}

void Engine::checkDeadlines(Clock::time_point now) {
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
    failInit(key, Status{Code::Timeout, "comm init: ranks " + missing +
                                            " did not join before the deadline"});
  }
  for (auto& [id, comm] : comms_) comm->checkDeadline(now);
  if (!delayedAnswers_.empty()) takeJoinAnswers();
  propagateFailures();
}

std::optional<Clock::time_point> Engine::nextDeadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  for (const auto& [key, init] : inits_) consider(init.deadline);
  for (const auto& [id, comm] : comms_) {
    if (auto d = comm->deadline()) consider(*d);
  }
  for (const auto& answer : delayedAnswers_) consider(answer.readyAt);
  return next;
}

void Engine::failPending(const Status& why) {
  std::vector<std::string> keys;
  for (auto& [key, init] : inits_) keys.push_back(key);
  for (const auto& key : keys) failInit(key, why);
  std::vector<std::string> remote;
  for (auto& [key, init] : remoteInits_) remote.push_back(key);
  for (const auto& key : remote) failRemoteInit(key, why);
  for (auto& [id, comm] : comms_) comm->fail(why);
  propagateFailures();
}

}  // namespace hc::session
