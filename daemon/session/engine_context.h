// EngineContext: what the engine's parts (engine.h) share, and nothing else: the options, the
// table of communicators, the id counters, the data path's staging memory, the daemons'
// MultiNode, what operators see, and the one way back into the engine, progress(comm).
// The engine owns it and outlives every part that borrows it. Runs on the IPC thread, except
// wake(), which pool workers and the bootstrap's threads call too.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/session/bootstrap.h"
#include "daemon/session/comm_observer.h"
#include "daemon/session/communicator.h"
#include "daemon/session/engine_options.h"
#include "daemon/staging/device_copier.h"
#include "daemon/staging/staging_pool.h"

namespace hc::session {

struct EngineContext {
  EngineContext(EngineOptions engineOptions, MultiNode nodes)
      : options(std::move(engineOptions)),
        multiNode(std::move(nodes)),
        staging(256ull << 20, options.maxStagingBytes),
        copier(options.stagingChunkBytes),
        doneFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        observer(&options, multiNode.identity.instance) {
    HC_CHECK(doneFd.valid());
  }
  EngineContext(const EngineContext&) = delete;
  EngineContext& operator=(const EngineContext&) = delete;

  // Another thread has something for the IPC thread (a pool run finished, a join answer came):
  // doneFd becomes readable, and the engine collects.
  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(doneFd.get(), &one, sizeof(one));
  }

  EngineOptions options;
  MultiNode multiNode;
  // Every communicator with a rank on this daemon, by id; the engine drops one when its last
  // local rank left.
  std::map<uint64_t, std::shared_ptr<Communicator>> comms;
  uint64_t nextCommId = 1;
  // Pool runs and NetExecutor jobs take their ids from this one counter.
  uint64_t nextRunId = 1;
  staging::StagingPool staging;
  staging::DeviceCopier copier;
  UniqueFd doneFd;
  CommObserver observer;
  // Moves a communicator on after its state changed: runs what it matched, and once it failed,
  // stops its inter-node work and tells its other daemons. Set by the engine; a part calls it
  // after it finished a match, formed a communicator or failed one.
  std::function<void(const std::shared_ptr<Communicator>&)> progress;
};

}  // namespace hc::session
