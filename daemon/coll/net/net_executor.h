// NetExecutor: the inter-node progress thread. It owns one Transport endpoint (UCX in the daemon,
// loopback in unit tests) and the one thread that drives it, and runs the NetOps (makeNetOp) that
// other threads hand it as NetJobs: it connects to the job's nodes, starts the op, alternates
// transport->progress() with every running op's progress(), and posts each job's outcome to a
// result queue that the owner drains when doneFd() turns readable.
//
// The loop. Pick up submitted jobs and aborts (in the order they were posted), drive the transport
// and the ops, send heartbeats; when a pass moved nothing, spin for at most kSpinAfterActivity,
// then sleep in epoll on the transport's eventFd() and the executor's wake eventfd, never longer
// than NetExecutorOptions::maxSleep or the next heartbeat (DESIGN.md, Threads: nothing spins
// unbounded on 2 cores). A transport without an event fd is polled every kPollInterval.
//
// Peer failure. The transport's peer-failure handler aborts every running job whose nodes include
// that peer, with Unavailable "peer daemon <node> went away: <why>" (<node> numbered as in that
// job); a job whose op saw the failure first (a post refused in start()) reports it the same way.
// The peer stays failed for the executor's life: a later job naming its address fails at once,
// without starting.
//
// Silent peers. A peer daemon that is stopped (SIGSTOP, a debugger) is no failure to the transport:
// its kernel still acknowledges. So the executor runs an application-level heartbeat on the
// reserved identity transport::kHeartbeatIdentity: as soon as it connects to a peer it posts a receive
// for that peer's heartbeats and sends it one, then one every heartbeatInterval. A peer that
// - is a node of a running job, and
// - has sent us at least one heartbeat (it has connected to us: it ran a job with us), and
// - has not been heard from for silenceTimeout, counted from the later of its last heartbeat and
//   the moment it last became part of a running job (silence while it was idle does not count)
// is treated as failed: its jobs end with Unavailable "peer daemon <node> silent for <N> ms", it is
// disconnected (so that no request with it can stay pending), and later jobs naming it fail at
// once. A peer that is in no running job is never failed for silence; a peer that has never
// connected to us is late, not silent, and is waited for without limit (DESIGN.md, Deadlines:
// a late rank is no failure) unless the transport reports it gone. When this thread itself did not
// run for silenceTimeout / 2 (the host stalled, or our daemon was the stopped one), every silence
// clock restarts: we were not listening, so we cannot tell.
//
// Threads: start(), the destructor and stop() run on the owner's thread; submit(), abortComm(),
// takeResults(), address() and doneFd() may be called from any thread. Everything else happens on
// the executor's own thread, which is the only one that touches the Transport after start().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "daemon/coll/net/comm_identities.h"
#include "daemon/coll/net/net_op.h"
#include "common/heartbeat.h"
#include "daemon/transport/transport.h"

namespace hc::coll::net {

// Spin this long after the last pass that moved something before sleeping.
constexpr std::chrono::microseconds kSpinAfterActivity{50};
// After abortComm(), messages of the aborted ops that arrive with no receive posted are dropped
// (releasing their senders) every kDrainInterval, for kDrainAbortedFor.
constexpr std::chrono::milliseconds kDrainInterval{50};
constexpr std::chrono::milliseconds kDrainAbortedFor{10'000};
// The sleep between passes when the transport has no event fd.
constexpr std::chrono::milliseconds kPollInterval{1};
// The sleep between passes while an op polls something outside the transport (NetOp::pollSoon).
constexpr std::chrono::microseconds kPollSoonNap{50};

struct NetJob {
  uint64_t id = 0;  // the caller's; echoed in the result, never interpreted
  // Everything but `transport` and `peers`, which the executor fills (given values are ignored).
  // The buffers are borrowed until this job's result has been posted.
  NetOpSpec spec;
  // nodes[i] reaches node i (its Transport::address()); nodes[spec.self] is not used.
  std::vector<transport::PeerAddress> nodes;
  // Builds the op from the completed spec on the progress thread; empty: makeNetOp. Lets the
  // owner wrap the op in work of its own that the progress thread drives (staging copies).
  std::function<Result<NetOpPtr>(const NetOpSpec& spec)> make;
};

struct NetJobResult {
  uint64_t id = 0;
  // Ok, or why the job failed: the connect error (naming the node), makeNetOp's InvalidArgument,
  // Unavailable for a failed or silent peer, an abort or shutdown, or the op's own failure.
  Status status;
  std::string algorithm;  // the op's algorithm(); empty when no op was made
};

struct NetExecutorOptions {
  // The longest sleep between two transport->progress() calls. UCX: transport::maxSleep().
  std::chrono::milliseconds maxSleep{500};
  // How often a heartbeat goes to every connected peer. At least 1 ms.
  std::chrono::milliseconds heartbeatInterval{500};
  // How long a peer in a running job may stay unheard before it is treated as failed; 0 turns the
  // check off (heartbeats are still sent: peers may check us). When on, at least 4 heartbeat
  // intervals, so that one late heartbeat never fails a peer.
  std::chrono::milliseconds silenceTimeout{5000};
  // Beaten on every pass of the progress thread (the watchdog's view of it); null = none.
  std::shared_ptr<Heartbeat> heartbeat;
  // Messages naming a communicator identity this daemon has not learned (comm_identities.h) are
  // held at most this long (the daemon: comm.init_timeout_ms, the longest a communicator may take
  // to form), and at most this many, of at most this many payload bytes, per peer.
  std::chrono::milliseconds holdUnknownFor{120000};
  size_t heldMessagesPerPeer = 4096;
  size_t heldBytesPerPeer = size_t{64} << 20;
  // Told of messages dropped unread, on the progress thread: reason "stale" (a retired identity),
  // "unknown" (still unknown after holdUnknownFor) or "over_limit" (beyond the per-peer bounds).
  std::function<void(std::string_view reason, size_t count)> onDropped;
};

// How often messages that arrived with no receive posted are sorted by their identity while some
// are held (otherwise at every heartbeat).
constexpr std::chrono::milliseconds kSweepInterval{100};

namespace detail {
class Mailbox;  // net_executor_loop.h: what the owner's threads and the progress thread share
}

class NetExecutor {
 public:
  // Takes the transport (nothing may use it any more but this executor) and starts the thread.
  // InvalidArgument for options outside their documented ranges or a null transport; a system
  // error when an eventfd, the epoll set or the thread cannot be made. Control path.
  [[nodiscard]] static Result<std::unique_ptr<NetExecutor>> start(
      std::unique_ptr<transport::Transport> transport, NetExecutorOptions options);
  // stop(), then releases the fds. Results not taken by then are dropped with the executor.
  ~NetExecutor();
  NetExecutor(const NetExecutor&) = delete;
  NetExecutor& operator=(const NetExecutor&) = delete;

  // Stops the thread and joins it; idempotent. Running jobs are aborted with Unavailable
  // "shutting down" (their nodes get failure notices) and queued ones fail with it without
  // starting; every submitted job's result is in the queue when stop() returns, so takeResults()
  // still works after it. Bounded: an op whose requests the transport has not made final
  // kStopForceAfter after the abort gets its peers disconnected; one still not final
  // kStopGiveUpAfter after the abort is leaked (logged) and its result is posted only once the
  // transport has been destroyed, so its buffers are the caller's again either way. The transport
  // is destroyed on the executor's thread before stop() returns.
  void stop();

  // The transport's address, captured at start(). Any thread.
  transport::PeerAddress address() const { return address_; }
  // The identities of the communicators whose traffic this executor carries: the owner claims
  // one before it submits the communicator's first job and retires it when the communicator
  // goes. Any thread.
  CommIdentities& identities() { return *identities_; }

  // Any thread; never blocks on the work. Queues the job and wakes the thread; the job's result is
  // posted exactly once. After stop() the result (Unavailable "shutting down") is posted at once.
  void submit(NetJob job);
  // Any thread. Aborts every job with spec.comm == comm that was submitted before this call and
  // has not finished: it ends with `why` (Unavailable "communicator aborted" when `why` is Ok),
  // unless it fails otherwise first. Jobs submitted after this call are not affected: for
  // kDrainAbortedFor only messages of the aborted jobs' (comm, seq) that find no receive posted
  // are dropped.
  void abortComm(uint64_t comm, Status why);

  // An eventfd, readable while results wait in the queue. Owned by the executor; any thread may
  // epoll it.
  int doneFd() const;
  // Any thread. Every result posted so far, in posting order; empties the queue and resets
  // doneFd().
  std::vector<NetJobResult> takeResults();

  static constexpr std::chrono::milliseconds kStopForceAfter{200};
  static constexpr std::chrono::milliseconds kStopGiveUpAfter{2000};

 private:
  NetExecutor(transport::PeerAddress address, std::unique_ptr<detail::Mailbox> mailbox,
              std::shared_ptr<CommIdentities> identities);

  const transport::PeerAddress address_;
  std::shared_ptr<CommIdentities> identities_;  // shared with the progress thread
  std::unique_ptr<detail::Mailbox> mailbox_;  // the fds and queues the threads share
  std::mutex stopMutex_;                      // serializes stop() calls
  std::thread thread_;
};

}  // namespace hc::coll::net
