// StagedTransfer: a send or a receive between daemons whose buffer is device memory that the
// transport cannot take in place, staged through host memory in chunks that overlap the wire.
// The sender copies its buffer out of the device chunk by chunk and each wire chunk leaves as soon
// as its bytes have landed in host memory (NetOpSpec::sendReady); the receiver copies each chunk
// into the device as soon as it has arrived (NetOpSpec::onLanded). So a transfer of S bytes takes
// about the slowest of the copy and the wire, not their sum, as the collectives' pipeline does.
// A transfer longer than its ring (StagedTransferPlan::ringBytes) goes through host memory of that
// size: a copy out refills a stretch of the ring once its previous lap's chunks were sent, and a
// chunk is received into the ring once its previous lap was copied into the device.
//
// It is a NetOp around the plain send or receive, built and driven on the progress thread
// (NetJob::make); its copies run on TransferLanes, device streams only that thread uses, and it
// polls their events (NetOp::pollSoon). A copy that fails fails the op with a DeviceError; while
// the wire half still runs it is aborted, so the peer hears of it through the op's failure notice
// at once (else through the communicator's notice, once the engine fails the communicator).
// Depends on hc_device and hc_coll_net.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "common/status.h"
#include "daemon/coll/net/net_op.h"
#include "daemon/device/device.h"

namespace hc::staging {

// One copy stream per device and direction for the progress thread. Destroyed by its owner after
// the progress thread stopped (streams wait for their work).
class TransferLanes {
 public:
  TransferLanes() = default;
  ~TransferLanes();
  TransferLanes(const TransferLanes&) = delete;
  TransferLanes& operator=(const TransferLanes&) = delete;

  // The stream for copies into (toDevice) or out of `device`, made on first use.
  Result<device::StreamId> stream(device::Device* device, bool toDevice);
  // Destroys a failed stream: the next copy in that direction gets a fresh one.
  void drop(device::Device* device, bool toDevice);

 private:
  std::map<std::pair<device::Device*, bool>, device::StreamId> streams_;
};

struct StagedTransferPlan {
  device::Device* device = nullptr;
  uint8_t* deviceBytes = nullptr;  // the rank's buffer, in device memory
  uint8_t* host = nullptr;         // staging; the spec's buffer
  uint64_t hostBytes = 0;  // of `host`: bytes, or ringBytes + the transport's directMinBytes
  uint64_t bytes = 0;
  uint64_t chunkBytes = 0;         // per copy (> 0); with a ring, a multiple of the wire chunk
  uint64_t ringBytes = 0;          // 0: host holds all bytes; else a multiple of chunkBytes
  TransferLanes* lanes = nullptr;  // borrowed; used on the progress thread only
};

// How a transfer of `bytes` stages: copies of `chunkBytes` (at least four, each at least one wire
// chunk of `wireBytes` and a multiple of it, at most about `mostBytes`) and, for transfers longer
// than four copies, a ring of four copies. hostBytes as StagedTransferPlan says, for a transport
// whose messages into device memory are at least `minTail` long.
struct StagingGeometry {
  uint64_t chunkBytes = 0;
  uint64_t ringBytes = 0;
  uint64_t hostBytes = 0;
};
StagingGeometry stagingGeometry(uint64_t bytes, uint64_t wireBytes, uint64_t mostBytes,
                                uint64_t minTail);

// The op for `spec` (a Send or Recv whose buffer is plan.host), staging as above.
[[nodiscard]] Result<coll::net::NetOpPtr> makeStagedTransfer(const coll::net::NetOpSpec& spec,
                                                             const StagedTransferPlan& plan);

}  // namespace hc::staging
