#include "daemon/session/engine.h"

#include <unistd.h>

#include <vector>

#include "daemon/session/validate.h"

namespace hc::session {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Engine::Engine(EngineOptions options, coll::ReductionPool* pool, MultiNode multiNode)
    : context_(std::move(options), std::move(multiNode)),
      net_(&context_),
      local_(&context_, pool),
      joiner_(&context_, &net_),
      shrinker_(&context_, &net_, &joiner_) {
  context_.progress = [this](const std::shared_ptr<Communicator>& comm) { progress(comm); };
}

Engine::~Engine() = default;

bool Engine::accepting(const Session& session) const {
  // Completions the client has not made room for count too: a client that never reads them
  // cannot make the daemon hold more.
  if (session.parkedCompletions() >= context_.options.maxInFlight) return false;
  if (session.inFlight < context_.options.maxInFlight) return true;
  return !session.openGroups.empty() &&
         session.inFlight < context_.options.maxInFlight + ipc::kMaxGroupOps;
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
  auto checkedType = checkedOpType(e.op);
  if (!checkedType.isOk()) {
    session->complete(e.requestId, checkedType.status());
    return;
  }
  const OpType type = *checkedType;
  if (type == OpType::CommInit) return joiner_.join(session, e);
  Member* m = session->member(e.commHandle);
  if (m == nullptr) {
    session->complete(e.requestId,
                      notFound("unknown communicator handle " + std::to_string(e.commHandle)));
    return;
  }
  auto comm = m->comm;
  if (type == OpType::CommDestroy) {
    comm->depart(m->rank, unavailable("destroyed its handle of the communicator"));
    session->removeMember(e.commHandle);
    session->closeGroup(e.commHandle);
    session->complete(e.requestId, okStatus());
    dropIfEmpty(comm);
    return;
  }
  // Not matched among the parent's ranks: a shrink gathers the survivors only, and a revoke is
  // one rank's act.
  if (type == OpType::CommShrink) return shrinker_.shrink(session, e, comm, m->rank);
  if (type == OpType::CommRevoke) return shrinker_.revoke(session, e, comm, m->rank);
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

void Engine::progress(const std::shared_ptr<Communicator>& comm) {
  // Running a match inline can finish a unit and so match the next one: loop until quiet.
  for (auto matches = comm->takeMatches(); !matches.empty(); matches = comm->takeMatches()) {
    for (auto& m : matches) {
      const bool spans = net_.spans(comm->id());
      if (m.ops.front().type == OpType::CommSplit) {
        if (spans) {
          net_.split(comm, m);
        } else {
          joiner_.splitLocally(comm, m);
        }
        continue;
      }
      // Everything but a transfer between two ranks of this daemon involves the others.
      const bool localTransfer = isPointToPoint(m.ops.front().type) && m.ops.size() == 2;
      if (spans && !localTransfer) {
        net_.run(comm, std::move(m));
      } else {
        local_.run(comm, std::move(m));
      }
    }
  }
  net_.notifyIfFailed(comm);
}

void Engine::collectFinished() {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(context_.doneFd.get(), &count, sizeof(count));
  local_.collectFinished();
  joiner_.takeJoinAnswers();
}

void Engine::collectNet() { net_.collect(); }

void Engine::sessionClosed(const SessionPtr& session, const Status& why) {
  for (auto& [handle, m] : session->members()) {
    m.comm->leave(m.rank,
                  Status{why.code(), "rank " + std::to_string(m.rank) + ": " + why.message()});
  }
  session->members().clear();
  joiner_.sessionClosed(session);
  shrinker_.sessionClosed(session);
  net_.propagateFailures();
  std::vector<std::shared_ptr<Communicator>> empty;
  for (auto& [id, comm] : context_.comms) {
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
  net_.propagateFailures();
  dropIfEmpty(comm);
}

void Engine::dropIfEmpty(const std::shared_ptr<Communicator>& comm) {
  if (comm->hasMembers()) return;
  net_.retire(comm);
  context_.comms.erase(comm->id());
  if (context_.options.board != nullptr) context_.options.board->commGone(comm->id());
}

void Engine::checkDeadlines(Clock::time_point now) {
  joiner_.failLateJoins(now);
  shrinker_.failLate(now);
  for (auto& [id, comm] : context_.comms) comm->checkDeadline(now);
  joiner_.takeDelayedAnswers();
  net_.propagateFailures();
}

std::optional<Clock::time_point> Engine::nextDeadline() const {
  std::optional<Clock::time_point> next = joiner_.nextDeadline();
  if (auto d = shrinker_.nextDeadline(); d && (!next || *d < *next)) next = d;
  for (const auto& [id, comm] : context_.comms) {
    if (auto d = comm->deadline(); d && (!next || *d < *next)) next = d;
  }
  return next;
}

void Engine::failPending(const Status& why) {
  joiner_.failAll(why);
  shrinker_.failAll(why);
  for (auto& [id, comm] : context_.comms) comm->fail(why);
  net_.propagateFailures();
}

}  // namespace hc::session
