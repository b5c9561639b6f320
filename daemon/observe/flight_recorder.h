// FlightRecorder: the last operations of one communicator as this daemon saw them, with the
// field names of PyTorch's flight recorder (record_id, collective_seq_id, p2p_seq_id,
// profiling_name, time_created_ns, input/output sizes and dtypes, state,
// time_discovered_started/completed_ns), and each local rank's progress: how many operations it
// posted and finished. Operators read it through Control.ListCommunicators / GetFlightRecord and
// `hcctl comms` / `hcctl trace`; a dump goes to the state directory when the communicator fails
// with work outstanding or waits past comm.late_report_ms.
//
// Threads: the IPC thread records (through its Communicator); gRPC threads take snapshots. One
// mutex per communicator; nothing here blocks on anything but it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hc::observe {

enum class FlightState { Scheduled, Started, Completed, Failed };
const char* flightStateName(FlightState state);  // "scheduled", "started", "completed", "failed"

// What the communicator knows of an operation when it is queued.
struct FlightOp {
  int rank = 0;               // the local rank that posted it
  std::string op;             // "allreduce", "send", ... (describeOp's names)
  bool p2p = false;
  uint64_t seq = 0;           // collective sequence, or the (rank, peer) transfer sequence
  int peer = -1;              // send/recv: the other rank; rooted collectives: the root
  std::string dtype;          // "float32", ...; "" for a barrier or a split
  std::vector<int64_t> inputSizes;   // elements, one shape: [count] or [nranks * count]
  std::vector<int64_t> outputSizes;
  uint64_t bytesIn = 0;   // read from the rank's send buffer
  uint64_t bytesOut = 0;  // written to its receive buffer
};

struct FlightEntry {
  uint64_t recordId = 0;  // per communicator, from 0, in posting order across local ranks
  FlightOp what;
  uint64_t collectiveSeqId = 0;  // PyTorch counts from 1; 0 = not a collective
  uint64_t p2pSeqId = 0;         // 0 = not a transfer
  std::string profilingName;     // "nccl:all_reduce"
  int64_t timeCreatedNs = 0;     // wall clock (ns since the epoch), like PyTorch's
  FlightState state = FlightState::Scheduled;
  int64_t timeDiscoveredStartedNs = 0;    // 0 = not yet
  int64_t timeDiscoveredCompletedNs = 0;  // 0 = not yet
  std::string error;                      // Failed: why
};

// A local rank's progress, for "who has not posted".
struct RankProgress {
  int rank = 0;
  uint64_t collectivesPosted = 0;
  uint64_t collectivesFinished = 0;
  uint64_t transfersPosted = 0;
  uint64_t transfersFinished = 0;
  std::optional<FlightEntry> lastPosted;
};

struct CommIdentity {
  uint64_t id = 0;       // the daemon's communicator id (local)
  std::string keyHex;    // the communicator key, 32 hex digits: the same on every daemon
  // What names it in messages between its daemons (transport.h, Tag::comm); 0 on one daemon.
  uint64_t wireIdentity = 0;
  int nranks = 0;
  std::vector<int> localRanks;
  // A communicator that spans daemons: each daemon's Peer address (where Peer.GetCommProgress
  // reaches it) and its ranks, in the rank table's node order. Empty on a single daemon.
  std::vector<std::string> nodeAddresses;
  std::vector<std::vector<int>> ranksOfNode;
  size_t nodes() const { return nodeAddresses.empty() ? 1 : nodeAddresses.size(); }
};

struct FlightSnapshot {
  CommIdentity comm;
  std::string state;     // "active", "failed"
  std::string failure;   // when failed
  uint64_t opsCompleted = 0;  // finished without error, all local ranks
  uint64_t opsFailed = 0;
  // Of the completed operations still in the record when they finished: max(bytesIn, bytesOut)
  // each, the size nccl-tests reports.
  uint64_t bytesCompleted = 0;
  std::vector<RankProgress> ranks;  // local ranks, ascending
  std::vector<FlightEntry> entries; // oldest first
};

class FlightRecorder {
 public:
  using Clock = std::chrono::system_clock;

  // Keeps the last `entriesPerRank` operations of each local rank.
  FlightRecorder(CommIdentity comm, size_t entriesPerRank);

  // Called (outside the lock, on the IPC thread) with each entry as it finishes: the metrics.
  // Set once, before the first posted().
  using FinishSink = std::function<void(const FlightEntry& entry, const Status& status)>;
  void setFinishSink(FinishSink sink) { sink_ = std::move(sink); }
  // Progress counted outside this record (the small ops the ranks combine among themselves),
  // added to each snapshot's ranks. Set before the recorder is shared; called under its lock.
  using ProgressSource = std::function<void(std::vector<RankProgress>* ranks)>;
  void setProgressSource(ProgressSource source) { progressSource_ = std::move(source); }

  // IPC thread. posted() returns the record id that started()/finished() take.
  uint64_t posted(FlightOp op);
  void started(uint64_t recordId);
  void finished(uint64_t recordId, const Status& status);
  void commFailed(const Status& why);

  // Any thread. The last `lastN` entries (0 = all kept).
  FlightSnapshot snapshot(size_t lastN = 0) const;
  const CommIdentity& identity() const;  // fixed at creation

 private:
  FlightEntry* findLocked(uint64_t recordId);
  std::optional<FlightEntry> finishLocked(uint64_t recordId, const Status& status);
  RankProgress& progressLocked(int rank);

  mutable std::mutex mutex_;
  CommIdentity comm_;
  const size_t capacity_;
  std::deque<FlightEntry> entries_;  // consecutive record ids
  uint64_t nextRecordId_ = 0;
  std::vector<RankProgress> ranks_;
  std::string failure_;
  ProgressSource progressSource_;
  uint64_t opsCompleted_ = 0;
  uint64_t opsFailed_ = 0;
  uint64_t bytesCompleted_ = 0;
  FinishSink sink_;
};

// "nccl:all_reduce" for "allreduce": PyTorch's profiling names, which its trace tools parse.
std::string profilingName(const std::string& op);

int64_t wallClockNs();

}  // namespace hc::observe
