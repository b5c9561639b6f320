// Engine: takes clients' submissions, forms and splits communicators, runs what each
// communicator matched (collectives in one pass, transfers as one copy), inline for small work
// and on the reduction pool for large.
// Runs on the IPC thread; the pool's workers reach it only through finished() + the done eventfd.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "daemon/coll/local_plan.h"
#include "daemon/coll/reduction_pool.h"
#include "daemon/session/client_staging.h"
#include "daemon/session/communicator.h"
#include "daemon/session/session.h"

namespace hc::session {

struct EngineOptions {
  uint64_t inlineBytes = 256 << 10;  // ops moving at most this run on the IPC thread
  uint64_t pieceBytes = 1 << 20;     // work of one pool piece, per buffer
  int initTimeoutMs = 120000;
  int opTimeoutMs = 0;
  uint32_t maxInFlight = 4096;  // per session: beyond it, submissions wait in the ring
};

class Engine {
 public:
  // Borrowed: the pool outlives the engine.
  Engine(EngineOptions options, coll::ReductionPool* pool);
  ~Engine();

  // The eventfd that becomes readable when pool jobs finished; then call collectFinished().
  int doneFd() const { return doneFd_.get(); }

  // Takes the session's submissions. Returns whether any was taken; a non-Ok status is a
  // protocol violation (a corrupt ring) and the caller closes the session.
  Result<bool> drain(const SessionPtr& session);
  void collectFinished();

  // The client went away or aborted one handle: its ranks leave their communicators.
  void sessionClosed(const SessionPtr& session, const Status& why);
  void abortHandle(const SessionPtr& session, uint64_t handle);

  // Deadlines of joins and of late ranks (when op_timeout_ms is set).
  void checkDeadlines(std::chrono::steady_clock::time_point now);
  std::optional<std::chrono::steady_clock::time_point> nextDeadline() const;

  // Shutdown: fails joins and unmatched ops; running ones finish. idle() once none runs.
  void failPending(const Status& why);
  bool idle() const { return running_.empty(); }

 private:
  struct Joiner {
    SessionPtr session;
    uint64_t requestId;
  };
  struct PendingInit {
    int nranks;
    std::chrono::steady_clock::time_point deadline;
    std::map<int, Joiner> joined;
  };
  struct Running {
    std::shared_ptr<Communicator> comm;
    Match match;
    std::unique_ptr<coll::LocalPlan> plan;
    StagedMatch staged;
  };

  void accept(const SessionPtr& session, const ipc::SubmitEntry& e);
  void join(const SessionPtr& session, const ipc::SubmitEntry& e);
  void failInit(const std::string& key, const Status& why);
  void progress(const std::shared_ptr<Communicator>& comm);
  void run(const std::shared_ptr<Communicator>& comm, Match match);
  void split(const std::shared_ptr<Communicator>& comm, const Match& match);
  void finish(uint64_t runId);
  void dropIfEmpty(const std::shared_ptr<Communicator>& comm);

  EngineOptions options_;
  coll::ReductionPool* pool_;
  UniqueFd doneFd_;
  std::map<std::string, PendingInit> inits_;
  std::map<uint64_t, std::shared_ptr<Communicator>> comms_;
  std::map<uint64_t, Running> running_;
  uint64_t nextCommId_ = 1;
  uint64_t nextRunId_ = 1;
  StagingPool staging_;
  std::mutex finishedMutex_;
  std::vector<uint64_t> finished_;  // run ids, filled by pool workers
};

}  // namespace hc::session
