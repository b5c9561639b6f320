// The inside of NetExecutor (net_executor.h): the Mailbox its callers' threads share with the
// progress thread, and the ProgressLoop that thread runs. Private to daemon/coll/net.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/coll/net/net_executor.h"
#include "daemon/coll/net/net_op.h"
#include "daemon/transport/transport.h"

namespace hc::coll::net::detail {

// What crosses threads: commands in (jobs and aborts, in posting order), results out. Any thread.
class Mailbox {
 public:
  struct Abort {
    uint64_t comm;
    Status why;
  };
  using Command = std::variant<NetJob, Abort>;

  Mailbox(UniqueFd wakeFd, UniqueFd doneFd)
      : wakeFd_(std::move(wakeFd)), doneFd_(std::move(doneFd)) {}

  int wakeFd() const { return wakeFd_.get(); }
  int doneFd() const { return doneFd_.get(); }

  // Queues the command and wakes the progress thread. After requestStop(), a job is answered at
  // once with Unavailable "shutting down" and an abort is dropped (nothing is left to abort).
  void post(Command command);
  void requestStop();

  // Progress thread. Every command posted so far, in order. *stopping tells whether stop was
  // requested; once it was, no command is ever queued again, so this take was the last one.
  std::vector<Command> take(bool* stopping);

  // Any thread: queues a result and makes doneFd() readable.
  void postResult(NetJobResult result);
  std::vector<NetJobResult> takeResults();

 private:
  void postResultLocked(NetJobResult result);

  UniqueFd wakeFd_;  // the progress thread sleeps on it
  UniqueFd doneFd_;  // readable iff results_ is not empty (both changed under mutex_)
  std::mutex mutex_;
  std::vector<Command> commands_;      // guarded by mutex_
  bool stopping_ = false;              // guarded by mutex_
  std::vector<NetJobResult> results_;  // guarded by mutex_
};

// Everything here runs on the executor's thread, which alone touches the transport.
class ProgressLoop {
 public:
  ProgressLoop(std::unique_ptr<transport::Transport> transport, const NetExecutorOptions& options,
               Mailbox& mailbox, UniqueFd epollFd,
               std::shared_ptr<const CommIdentities> identities);
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  // Until stop was requested and every job has ended (or was given up on: NetExecutor::stop()).
  // Destroys the transport before it returns.
  void run();

 private:
  using Clock = std::chrono::steady_clock;

  struct Job {
    uint64_t id;
    NetOpSpec spec;  // transport and peers filled in
    NetOpPtr op;
    bool abortedByOwner = false;  // abortComm() or shutdown: the owner's status stands
  };

  // A peer daemon this endpoint connected to, for the executor's life.
  struct Peer {
    transport::PeerId id = 0;
    bool failed = false;
    Status failure;  // once failed: "went away: ..." or "silent for N ms"
    bool heard = false;
    Clock::time_point lastHeard;  // the last heartbeat's arrival, once heard
    size_t runningJobs = 0;       // running jobs that name this peer
    // When runningJobs last went from 0 to 1: silence before it does not count.
    Clock::time_point watchedSince;
    // Heartbeat requests in flight (0: none), and the buffers lent to them.
    transport::RequestId beatRecv = 0;
    transport::RequestId beatSend = 0;
    uint64_t inbox = 0;
    uint64_t outbox = 0;  // what the last heartbeat sent carries: how many were sent before
  };

  // ---- jobs (net_executor_loop.cc) ----
  void apply(std::vector<Mailbox::Command> commands, bool stopping);
  void startJob(NetJob job);
  void abortComm(uint64_t comm, const Status& why);
  // Progresses every running job and posts the results of those that ended; returns how many.
  size_t progressJobs();
  void postResult(uint64_t id, Status status, std::string algorithm);
  // An op that failed on its own, Unavailable, because a peer failed (it saw the failure before
  // this loop did, e.g. in start()) reports it the way failPeer() aborts do: naming the peer.
  Status explain(const Job& job, Status status) const;
  void involve(const Job& job, int delta);
  void sleep(Clock::time_point now);
  void beginShutdown(Clock::time_point now);
  // True once the shutdown is over (or given up on).
  bool shutdownDone(Clock::time_point now);
  void teardown();

  // ---- peers and heartbeats (net_executor_peers.cc) ----
  // The PeerId of node `node` at `address`, connecting on first use; an error (naming the node)
  // when the connect fails or the peer has failed.
  [[nodiscard]] Result<transport::PeerId> resolve(const transport::PeerAddress& address,
                                                  uint32_t node);
  // A new peer: post the heartbeat receive and send the first heartbeat.
  void greet(Peer& peer);
  void postBeatRecv(Peer& peer);
  void sendBeat(Peer& peer);
  // Tests heartbeat requests; re-posts each receive that completed.
  void pollHeartbeats(Clock::time_point now);
  // Acts on what the transport's failure handler reported during the last progress().
  size_t handleReportedFailures();
  // Marks the peer failed for good and aborts every running job that names it.
  void failPeer(Peer& peer, const std::string& reason, bool disconnect);
  // Periodic work: heartbeats, the silence check; sets nextHousekeeping_.
  void housekeeping(Clock::time_point now);
  // Restarts the silence clocks when this thread itself did not run for a long time.
  void checkStall(Clock::time_point now);
  // Drops what arrived unmatched for retired identities, and for unknown ones past their time or
  // beyond the per-peer bounds (comm_identities.h). Returns whether any unknown one is held.
  bool sweepUnexpected(Clock::time_point now);

  std::unique_ptr<transport::Transport> transport_;  // reset by teardown(), before the buffers go
  // Ops aborted by the owner, by the (comm, seq) fields of their tags, and until when their stray
  // traffic is drained: an aborted op posts no more receives, and a peer's send into it (a
  // rendezvous) would otherwise wait for ever, holding that peer's op and its buffers. Only the
  // aborted ops' own tags: a later op of the same communicator may already have messages
  // waiting for its receives.
  std::map<transport::Tag, Clock::time_point> draining_;
  const NetExecutorOptions options_;
  const std::shared_ptr<const CommIdentities> identities_;
  Mailbox& mailbox_;  // borrowed: the NetExecutor owns it and joins this thread first
  UniqueFd epollFd_;  // over mailbox_.wakeFd() and transport_->eventFd()
  const bool transportHasFd_;

  std::vector<Job> jobs_;                                               // running
  std::unordered_map<transport::PeerId, std::unique_ptr<Peer>> peers_;  // stable: buffers lent
  std::map<std::vector<uint8_t>, transport::PeerId> byAddress_;
  std::vector<std::pair<transport::PeerId, Status>> reportedFailures_;  // from the handler

  Clock::time_point lastActivity_;
  Clock::time_point lastPass_;
  Clock::time_point nextBeat_;
  Clock::time_point nextHousekeeping_;

  bool shuttingDown_ = false;
  bool forced_ = false;  // peers disconnected to end a slow shutdown
  Clock::time_point stopAt_;
};

}  // namespace hc::coll::net::detail
