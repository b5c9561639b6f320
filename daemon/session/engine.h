// Engine: takes clients' submissions and wires the parts that act on them, each a class of its
// own that shares only the EngineContext (the communicator table, staging memory, options, what
// operators see, and progress(comm), which the engine implements):
//   CommJoiner   (comm_joiner.h)   forms communicators: CommInit here or at a root daemon, and
//                                  splits among this daemon's ranks;
//   CommShrinker (comm_shrinker.h) shrink (survivors make a child) and revoke;
//   LocalRunner  (local_runner.h)  runs what a communicator matched among this daemon's ranks,
//                                  in one pass, inline or on the reduction pool;
//   NetRunner    (net_runner.h)    runs communicators that span daemons: NetOps on the
//                                  NetExecutor, splits across daemons, watches, notices, drains;
//                                  where a transfer meets the wire is TransferPath's choice;
//   CommObserver (comm_observer.h) what operators see: flight records, incidents, counters.
// The engine routes each submission, turns a communicator's matches into runs (progress), and
// handles deadlines, clients that leave or abort, and shutdown.
// Runs on the IPC thread; other threads reach it only through doneFd() and netDoneFd().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "daemon/coll/reduction_pool.h"
#include "daemon/session/bootstrap.h"
#include "daemon/session/comm_joiner.h"
#include "daemon/session/comm_keys.h"
#include "daemon/session/comm_shrinker.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_context.h"
#include "daemon/session/engine_options.h"
#include "daemon/session/local_runner.h"
#include "daemon/session/net_runner.h"
#include "daemon/session/session.h"

namespace hc::session {

class Engine {
 public:
  // Borrowed: the pool (and what multiNode names) outlive the engine.
  Engine(EngineOptions options, coll::ReductionPool* pool, MultiNode multiNode = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The eventfd that becomes readable when pool jobs finished or join answers came from root
  // daemons; then call collectFinished().
  int doneFd() const { return context_.doneFd.get(); }

  // Takes the session's submissions. Returns whether any was taken; a non-Ok status is a
  // protocol violation (a corrupt ring) and the caller closes the session.
  // At most `budget` entries per call: the caller takes turns among its sessions, so that no
  // client's flood holds the IPC thread.
  Result<bool> drain(const SessionPtr& session, uint32_t budget = UINT32_MAX);
  // Whether drain() would take the session's next submission now (back-pressure: in-flight ops,
  // open groups, completions parked for a client that has not made room).
  bool accepting(const Session& session) const;
  void collectFinished();
  // Multi-node: readable when inter-node work finished (-1 without multi-node); then call
  // collectNet().
  int netDoneFd() const { return net_.doneFd(); }
  void collectNet();

  // The client went away or aborted one handle: its ranks leave their communicators.
  void sessionClosed(const SessionPtr& session, const Status& why);
  void abortHandle(const SessionPtr& session, uint64_t handle);

  // Deadlines of joins and of late ranks (when op_timeout_ms is set).
  void checkDeadlines(std::chrono::steady_clock::time_point now);
  std::optional<std::chrono::steady_clock::time_point> nextDeadline() const;

  // Shutdown: fails joins and unmatched ops; running ones finish. idle() once none runs.
  void failPending(const Status& why);
  // Watches on other daemons never end on their own: they do not keep the daemon from stopping.
  bool idle() const { return local_.idle() && net_.idle(); }

  // Peer daemons (by Peer address) found unreachable since a communicator last formed with them:
  // the Peers health status is SERVING only while this is empty.
  const std::set<std::string>& lostPeers() const { return context_.observer.lostPeers(); }

 private:
  // Routes one submission: CommInit to the joiner, CommDestroy here, the rest to its
  // communicator.
  void accept(const SessionPtr& session, const ipc::SubmitEntry& e);
  // Runs what the communicator matched, until it matches nothing more; once it failed, its
  // other daemons hear it (the context's progress).
  void progress(const std::shared_ptr<Communicator>& comm);
  void dropIfEmpty(const std::shared_ptr<Communicator>& comm);

  // Declared first: every part borrows it.
  EngineContext context_;
  NetRunner net_;
  LocalRunner local_;
  CommJoiner joiner_;
  CommShrinker shrinker_;
};

}  // namespace hc::session
