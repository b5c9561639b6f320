// LocalRunner: runs what a communicator matched among the ranks of this daemon, in one pass:
// reduced on a device when the operands' devices can (device_reduce.h), otherwise on the host
// through the clients' segments (device operands staged in and out), inline when small and on
// the reduction pool when large.
// Runs on the IPC thread; the pool's workers reach it only through the context's wake() and
// collectFinished().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/coll/local_plan.h"
#include "daemon/coll/reduction_pool.h"
#include "daemon/session/client_staging.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_context.h"

namespace hc::session {

// The buffers of a match's ops as plans take them, with each buffer-resident scalar read now.
std::vector<coll::RankBuffers> matchBuffers(const Match& match);

class LocalRunner {
 public:
  // Borrowed: the context and the pool (null: everything runs inline) outlive this object.
  LocalRunner(EngineContext* context, coll::ReductionPool* pool)
      : context_(*context), pool_(pool) {}
  LocalRunner(const LocalRunner&) = delete;
  LocalRunner& operator=(const LocalRunner&) = delete;

  // Runs `match`, every op of it on this daemon (a transfer: the sender's copy into the
  // receiver's buffer). Finishes it before returning, unless it went to the pool: then it
  // finishes in a later collectFinished().
  void run(const std::shared_ptr<Communicator>& comm, Match match);
  // Finishes the runs the pool completed since the last call (the context's doneFd woke the
  // IPC thread): their ranks hear the results, and their communicators move on.
  void collectFinished();
  bool idle() const { return running_.empty(); }

 private:
  struct Running {
    std::shared_ptr<Communicator> comm;
    Match match;
    std::unique_ptr<coll::LocalPlan> plan;
    StagedMatch staged;
  };
  void finish(uint64_t runId);

  EngineContext& context_;
  coll::ReductionPool* pool_;
  std::map<uint64_t, Running> running_;
  std::mutex finishedMutex_;
  std::vector<uint64_t> finished_;  // run ids, filled by pool workers
};

}  // namespace hc::session
