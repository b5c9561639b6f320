// ProcessGroupHetero: torch.distributed's backend "hetero" over hetero-commd (CPU tensors).
//
// Three hc communicators per group ("lanes"), bootstrapped by rank 0's hc unique ids through the
// group's c10d Store: one for the collectives, and two for send and recv, by direction (transfers
// to a higher rank on one, to a lower rank on the other). hc runs the operations of a
// communicator in issue order on each rank; torch's isend/irecv promise no order between
// operations, so two ranks that each post an isend to the other before the irecv would wait on
// each other forever on one communicator. By direction, an exchange between neighbours (ring and
// pipeline schedules, batch_isend_irecv) always finds its partner, and transfers never wait for
// collectives. Every operation is issued to libhcclient at once (non-blocking) and completed by
// its lane's completion thread, which waits for the lane's requests in issue order (hc's own
// completion order on that communicator); a watchdog thread fails an
// operation that outlives its timeout, names the ranks that have not posted it (each rank
// reports how many operations it has posted through the store), and aborts the communicator as
// ProcessGroupNCCL's async error handling does, so every later operation raises at once.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "python/src/work_hetero.h"

namespace hc::torchext {

class ProcessGroupHetero : public c10d::ProcessGroup {
 public:
  ProcessGroupHetero(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupHetero() override;

  const std::string getBackendName() const override { return "hetero"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  enum LaneId { kCollectives = 0, kToHigher = 1, kToLower = 2, kLanes = 3 };
  struct Lane {
    hc_comm_t comm = nullptr;
    std::deque<c10::intrusive_ptr<WorkHetero>> pending;  // issued, not complete, in order
    std::condition_variable queued;
    std::thread completion;
  };

  // What an operation's body gets: the communicator to issue on and the work to fill.
  struct Issue {
    hc_comm_t comm;
    WorkHetero& work;
    hc_request_t* addRequest();  // a slot for one more request of the work
  };
  using Body = std::function<void(Issue&)>;

  // Runs body under the issue lock with a new work, then hands the work to the completion
  // thread. Raises at once when the group is aborted or the body's hc call fails.
  c10::intrusive_ptr<c10d::Work> run(const char* name, c10d::OpType type,
                                     std::chrono::milliseconds timeout,
                                     std::vector<at::Tensor> outputs, const Body& body,
                                     LaneId lane = kCollectives);
  // The lane of a transfer from src to dst.
  static LaneId transferLane(int src, int dst) { return dst > src ? kToHigher : kToLower; }
  // Raises with hc's error text when st is not HC_OK (for hc calls made while issuing).
  void check(hc_status_t st, const char* name, hc_comm_t comm) const;

  void bootstrap(std::chrono::milliseconds timeout);
  void completionLoop(Lane& lane);
  void watchdogLoop();
  // Fails the group with text and aborts the communicator: every pending and later op raises.
  void abortWith(const std::string& text);
  std::string missingRanks(uint64_t seq);
  // Why another rank aborted the group, from the store; "" when none said.
  std::string peerAbortReason();
  void publishProgress(uint64_t posted);

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  Lane lanes_[kLanes];

  // Issuing holds it shared; aborting (which frees the handle) holds it exclusively.
  std::shared_timed_mutex issueMutex_;
  std::atomic<bool> aborted_{false};
  std::string abortText_;  // under mutex_

  std::mutex mutex_;  // guards the lanes' queues, abortText_ and the progress fields
  std::condition_variable watchdogWake_;
  uint64_t nextSeq_ = 1;
  // Collectives posted: what the ranks compare to name who has not posted one (transfers are
  // not posted by every rank).
  uint64_t collectivesPosted_ = 0;
  uint64_t published_ = 0;  // the collectives count last written to the store
  std::chrono::steady_clock::time_point lastPublish_{};
  bool stopping_ = false;  // completion threads end once nothing is pending
  bool watchdogStop_ = false;
  // When the sleeping watchdog wakes; a work due earlier wakes it.
  std::chrono::steady_clock::time_point watchdogUntil_ =
      std::chrono::steady_clock::time_point::max();
  std::thread watchdog_;
};

}  // namespace hc::torchext
