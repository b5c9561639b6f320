// ProgressLoop: the executor thread's loop, its jobs, its sleep and its shutdown. Peers and
// heartbeats: net_executor_peers.cc.
#include <spdlog/spdlog.h>
#include <sys/epoll.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "common/reduce/reduce.h"
#include "daemon/coll/net/net_executor_loop.h"

namespace hc::coll::net::detail {
namespace {

// While shutting down, check the shutdown deadlines at least this often.
constexpr std::chrono::milliseconds kShutdownTick{10};

Status shuttingDown() { return unavailable("shutting down"); }

uint64_t bytesOf(const NetOpSpec& spec) {
  return spec.count > 0 ? spec.count * std::max<size_t>(dtypeSize(spec.dtype), 1) : 0;
}

}  // namespace

ProgressLoop::ProgressLoop(std::unique_ptr<transport::Transport> transport,
                           const NetExecutorOptions& options, Mailbox& mailbox, UniqueFd epollFd,
                           std::shared_ptr<const CommIdentities> identities)
    : transport_(std::move(transport)),
      options_(options),
      identities_(std::move(identities)),
      mailbox_(mailbox),
      epollFd_(std::move(epollFd)),
      transportHasFd_(transport_->eventFd() >= 0) {}

void ProgressLoop::run() {
  // The handler runs inside transport_->progress(): only note the failure there, and act on it
  // once progress() has returned (handleReportedFailures).
  transport_->setPeerFailureHandler([this](transport::PeerId peer, const Status& why) {
    reportedFailures_.emplace_back(peer, why);
  });
  const Clock::time_point begin = Clock::now();
  lastActivity_ = lastPass_ = nextBeat_ = nextHousekeeping_ = begin;

  while (true) {
    if (options_.heartbeat) options_.heartbeat->beat();
    bool stopping = false;
    std::vector<Mailbox::Command> commands = mailbox_.take(&stopping);
    const bool hadCommands = !commands.empty();
    apply(std::move(commands), stopping);
    if (stopping && !shuttingDown_) beginShutdown(Clock::now());

    // One pass: the transport, what it reported, the heartbeats, every op.
    size_t work = transport_->progress();
    work += handleReportedFailures();
    Clock::time_point now = Clock::now();
    checkStall(now);
    if (work > 0) pollHeartbeats(now);
    work += progressJobs();
    if (!shuttingDown_ && now >= nextHousekeeping_) housekeeping(now);
    lastPass_ = now;

    if (shuttingDown_ && shutdownDone(now)) break;
    if (work > 0 || hadCommands) {
      lastActivity_ = now;
      continue;
    }
    // Nothing moved: spin a little (the next message often follows at once), then sleep.
    if (now - lastActivity_ < kSpinAfterActivity) continue;
    sleep(now);
  }
  teardown();
}

// ---- commands and jobs -------------------------------------------------------------------------

void ProgressLoop::apply(std::vector<Mailbox::Command> commands, bool stopping) {
  for (Mailbox::Command& command : commands) {
    if (auto* abort = std::get_if<Mailbox::Abort>(&command)) {
      abortComm(abort->comm, abort->why);
    } else if (stopping || shuttingDown_) {
      postResult(std::get<NetJob>(command).id, shuttingDown(), "");
    } else {
      startJob(std::move(std::get<NetJob>(command)));
    }
  }
}

void ProgressLoop::startJob(NetJob job) {
  NetOpSpec& spec = job.spec;
  const size_t n = job.nodes.size();
  if (spec.self >= n) {
    postResult(job.id,
               invalidArgument("net job: self " + std::to_string(spec.self) + " is not one of " +
                               std::to_string(n) + " nodes"),
               "");
    return;
  }
  spec.transport = transport_.get();
  spec.peers.assign(n, 0);
  for (uint32_t node = 0; node < n; ++node) {
    if (node == spec.self) continue;
    Result<transport::PeerId> peer = resolve(job.nodes[node], node);
    if (!peer.isOk()) {
      postResult(job.id, peer.status(), "");
      return;
    }
    spec.peers[node] = *peer;
  }
  Result<NetOpPtr> made = job.make ? job.make(spec) : makeNetOp(spec);
  if (!made.isOk()) {
    postResult(job.id, made.status(), "");
    return;
  }
  NetOpPtr op = std::move(made.value());
  spdlog::debug("net executor: job {}: {} of {} B, node {} of {}, comm {:x} seq {:x}: {}", job.id,
                netOpKindName(spec.kind), bytesOf(spec), spec.self, n, spec.comm, spec.seq,
                op->algorithm());
  Status started = op->start();
  // start() fails only when misused; the op then reports the failure through progress().
  if (!started.isOk()) op->abort(std::move(started));
  jobs_.push_back(Job{job.id, std::move(spec), std::move(op), false});
  involve(jobs_.back(), +1);
}

void ProgressLoop::abortComm(uint64_t comm, const Status& why) {
  nextHousekeeping_ = Clock::time_point::min();
  for (Job& job : jobs_) {
    if (job.spec.comm != comm) continue;
    draining_[transport::makeTag(comm, job.spec.seq, 0)] = Clock::now() + kDrainAbortedFor;
    job.abortedByOwner = true;
    job.op->abort(why);
  }
}

size_t ProgressLoop::progressJobs() {
  size_t ended = 0;
  std::erase_if(jobs_, [&](Job& job) {
    Result<bool> done = job.op->progress();
    if (done.isOk() && !*done) return false;
    if (!done.isOk()) {
      spdlog::debug("net executor: job {} ({}) failed: {}", job.id, job.op->algorithm(),
                    done.status().toString());
    }
    involve(job, -1);
    postResult(job.id, explain(job, done.status()), job.op->algorithm());
    ++ended;
    return true;
  });
  return ended;
}

void ProgressLoop::postResult(uint64_t id, Status status, std::string algorithm) {
  mailbox_.postResult(NetJobResult{id, std::move(status), std::move(algorithm)});
}

Status ProgressLoop::explain(const Job& job, Status status) const {
  if (status.code() != Code::Unavailable || job.abortedByOwner ||
      status.message().starts_with("peer daemon ")) {
    return status;
  }
  for (uint32_t node = 0; node < job.spec.peers.size(); ++node) {
    if (node == job.spec.self) continue;
    const Peer& peer = *peers_.at(job.spec.peers[node]);
    if (peer.failed) {
      return unavailable("peer daemon " + std::to_string(node) + " " + peer.failure.message());
    }
  }
  return status;
}

void ProgressLoop::involve(const Job& job, int delta) {
  const Clock::time_point now = Clock::now();
  std::vector<transport::PeerId> seen;
  for (uint32_t node = 0; node < job.spec.peers.size(); ++node) {
    const transport::PeerId id = job.spec.peers[node];
    if (node == job.spec.self || std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    Peer& peer = *peers_.at(id);
    if (delta > 0 && peer.runningJobs++ == 0) peer.watchedSince = now;
    if (delta < 0) --peer.runningJobs;
  }
  nextHousekeeping_ = Clock::time_point::min();  // the set of watched peers changed
}

// ---- sleeping ----------------------------------------------------------------------------------

void ProgressLoop::sleep(Clock::time_point now) {
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.maxSleep);
  if (shuttingDown_) timeout = std::min<std::chrono::milliseconds>(timeout, kShutdownTick);
  if (!transportHasFd_) timeout = std::min<std::chrono::milliseconds>(timeout, kPollInterval);
  if (!shuttingDown_ && nextHousekeeping_ > now) {
    // Round up: waking a little late is fine, waking early only spins through another pass.
    const auto due = std::chrono::ceil<std::chrono::milliseconds>(nextHousekeeping_ - now);
    timeout = std::min(timeout, due);
  } else if (!shuttingDown_) {
    return;  // housekeeping is due now
  }
  epoll_event events[4];
  // An op polling a device copy is woken by no fd: a short nap instead, between two looks at
  // the fds.
  const bool pollSoon =
      std::any_of(jobs_.begin(), jobs_.end(), [](const Job& job) { return job.op->pollSoon(); });
  // EINTR or an error only shortens the sleep; the loop re-checks everything either way.
  if (options_.heartbeat) options_.heartbeat->sleeping(true);
  if (pollSoon) {
    if (::epoll_wait(epollFd_.get(), events, 4, 0) == 0) std::this_thread::sleep_for(kPollSoonNap);
  } else {
    (void)::epoll_wait(epollFd_.get(), events, 4, static_cast<int>(timeout.count()));
  }
  if (options_.heartbeat) options_.heartbeat->sleeping(false);
}

// ---- shutdown ----------------------------------------------------------------------------------

void ProgressLoop::beginShutdown(Clock::time_point now) {
  shuttingDown_ = true;
  stopAt_ = now;
  for (Job& job : jobs_) {
    job.abortedByOwner = true;
    job.op->abort(shuttingDown());
  }
  for (auto& [id, peer] : peers_) {
    if (peer->beatRecv != 0) (void)transport_->cancel(peer->beatRecv);
  }
}

bool ProgressLoop::shutdownDone(Clock::time_point now) {
  pollHeartbeats(now);  // collects the cancelled receives and the last sends
  const bool beatsFinal = std::all_of(peers_.begin(), peers_.end(), [](const auto& entry) {
    return entry.second->beatRecv == 0 && entry.second->beatSend == 0;
  });
  if (jobs_.empty() && beatsFinal) return true;
  if (!forced_ && now - stopAt_ >= NetExecutor::kStopForceAfter) {
    // Cancelled requests the transport cannot end on its own (a send into a stopped peer): the
    // contract ends every request with a disconnected peer.
    forced_ = true;
    spdlog::warn(
        "net executor: {} job(s) still draining {} ms into the shutdown; disconnecting "
        "every peer",
        jobs_.size(), NetExecutor::kStopForceAfter.count());
    for (auto& [id, peer] : peers_) (void)transport_->disconnect(id);
  }
  return now - stopAt_ >= NetExecutor::kStopGiveUpAfter;
}

void ProgressLoop::teardown() {
  transport_->setPeerFailureHandler({});
  // Ops the transport never made final cannot be destroyed (they still lend buffers): leak them,
  // destroy the transport, and only then hand their buffers back with the results.
  std::vector<std::pair<uint64_t, std::string>> leaked;
  for (Job& job : jobs_) {
    spdlog::error(
        "net executor: job {} ({}) did not drain within {} ms of the shutdown; leaking "
        "its op",
        job.id, job.op->algorithm(), NetExecutor::kStopGiveUpAfter.count());
    leaked.emplace_back(job.id, job.op->algorithm());
    (void)job.op.release();
  }
  jobs_.clear();
  transport_.reset();  // before peers_, whose heartbeat buffers it may still hold
  for (auto& [id, algorithm] : leaked) postResult(id, shuttingDown(), std::move(algorithm));
}

}  // namespace hc::coll::net::detail
