// TransferPath: where a send or receive between daemons meets the wire. A device buffer whose
// device passed the direct probe is lent to the transport in place; other device memory is
// staged beside the wire on the progress thread (staging/staged_transfer.h), through the copy
// lanes this object owns; the client's own memory is staged here, before the op. The engine's
// multi-node runner asks it once per transfer and runs the NetOp itself.
// Runs on the IPC thread; the lanes are used on the progress thread by the StagedTransfers it
// plans.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "daemon/coll/local_plan.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/session/client_staging.h"
#include "daemon/session/communicator.h"
#include "daemon/staging/direct_probe.h"
#include "daemon/staging/staged_transfer.h"

namespace hc::session {

class TransferPath {
 public:
  struct Options {
    // Borrowed: the engine's MultiNode::direct, which outlives this object.
    const staging::DirectDevices* direct = nullptr;
    uint64_t wireChunkBytes = 0;     // the NetOps' chunk (MultiNode::netOptions.chunkBytes)
    uint64_t stagingChunkBytes = 0;  // devices.staging_chunk_bytes
    metrics::DaemonMetrics* metrics = nullptr;  // borrowed; null: no metrics
  };
  // Borrowed: the engine's staging pool and copier outlive this object.
  TransferPath(Options options, staging::StagingPool* pool, staging::DeviceCopier* copier)
      : options_(options), pool_(pool), copier_(copier) {}
  TransferPath(const TransferPath&) = delete;
  TransferPath& operator=(const TransferPath&) = delete;

  struct Placement {
    bool direct = false;  // lent in place; false: staged (device memory took the host path)
    transport::MemoryKind memory = transport::MemoryKind::Host;
    // Device memory staged beside the wire on the progress thread.
    std::optional<staging::StagedTransferPlan> staged;
  };
  // Chooses where the transfer `match` (one op, its other half on another daemon) meets the wire
  // and aims bufs[0] there; staged keeps what is staged here. placement->direct is set before
  // any error: the caller counts a staging fallback either way.
  [[nodiscard]] Status place(const Match& match, std::vector<coll::RankBuffers>& bufs,
                             StagedMatch& staged, Placement* placement);

 private:
  Options options_;
  staging::StagingPool* pool_;
  staging::DeviceCopier* copier_;
  // The progress thread's copy streams for staged transfers. The executor stops before the
  // engine (and this) goes, so nothing uses them when they are destroyed.
  staging::TransferLanes lanes_;
};

}  // namespace hc::session
