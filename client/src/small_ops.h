// Small collectives among the ranks of one node without a daemon round trip: the client's side
// of a communicator's small-operation area (common/ipc/small_area.h has the layout and protocol).
//
// A communicator gets an area when every rank asked for it at creation (hc_config_t
// host_small_ops), all of them sit on one daemon and share one uid. Its collectives are counted
// in one sequence on every rank; one that fits a slot (kAreaSlotBytes of this rank's
// contribution) is a "small op": the rank copies its contribution into its slot when the call is
// made and returns; the operation finishes when every rank's contribution is there, computed by
// every rank from the slots in rank order. Larger collectives and the other operations go to the
// daemon as before. One order per communicator: a small op waits, when it is issued, for the
// communicator's operations in the daemon, and an operation for the daemon waits for the
// communicator's small ops to finish on this rank.
//
// What the daemon still does: it fails the area when the communicator fails (a rank that died,
// aborted or left), so no rank waits on a dead party, and it reads the ranks' counters for
// operators. When the ranks' descriptors of a small op disagree (or a rank took it through the
// daemon), each rank hands the operation to the daemon, which fails the communicator with the
// same words on every rank.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "client/src/request.h"
#include "common/ipc/protocol.h"
#include "common/ipc/small_area.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::client {

struct CommState;
struct BufferArg;

class SmallOpArea {
 public:
  // Maps the area the daemon granted (fd of `bytes` bytes) as rank `rank` of `nranks`.
  static Result<std::shared_ptr<SmallOpArea>> attach(UniqueFd fd, uint64_t bytes, int rank,
                                                     int nranks);
  ~SmallOpArea();
  SmallOpArea(const SmallOpArea&) = delete;
  SmallOpArea& operator=(const SmallOpArea&) = delete;

  // The collectives the area counts in its sequence, whichever path they take.
  static bool counts(ipc::OpType op);
  // Whether e (a counted collective) is a small op: this rank's contribution fits a slot. The
  // same answer on every rank whose descriptor agrees.
  bool fits(const ipc::SubmitEntry& e) const;

  // Issues e as a small op completing `request`: waits for the communicator's operations in the
  // daemon, then for its row of slots, and contributes. Never waits for another rank's call.
  // e carries the reduction operator as applyRedop set it (a pre-multiplied sum's scalar by value).
  Status post(const std::shared_ptr<CommState>& comm, const ipc::SubmitEntry& e, BufferArg send,
              BufferArg recv, const RequestPtr& request);
  // Before an operation goes to the daemon: waits until this rank's small ops finished, and
  // counts a collective in the sequence.
  Status beforeDaemonOp(CommState& comm, ipc::OpType op);

  // Finishes the small ops whose contributions are all there, in order; returns whether any
  // remain. Hands over to the daemon the ones whose descriptors disagree.
  bool progress();
  // Waits until `request` (a small op of this area) is done, the area failed, the communicator
  // was aborted or the daemon is gone.
  Status wait(CommState& comm, const RequestPtr& request);

  // This rank aborts its handle: the others' waits end with "rank N aborted", its own small ops
  // fail with why.
  void abandon(const Status& why);

  // progress() on every area of this process.
  static void progressAll();
  // Whether any area of this process holds unfinished small ops.
  static bool anyPending();

 private:
  struct Op {
    uint64_t seq = 0;
    ipc::SubmitEntry entry{};
    const void* send = nullptr;
    uint64_t sendBytes = 0;
    void* recv = nullptr;
    uint64_t recvBytes = 0;
    RequestPtr request;
    std::shared_ptr<CommState> comm;  // for the hand-over to the daemon
  };
  SmallOpArea() = default;
  // Whether op's contributions are all present (1), one is missing (0), or the ranks disagree
  // or one took it to the daemon (-1). Under mutex_.
  int readiness(const Op& op) const;
  void compute(const Op& op) const;
  Status failure() const;
  void finish(uint64_t seq);
  // Spins briefly, then sleeps on the area's event word until ready() or a failure.
  template <typename Ready>
  Status waitFor(CommState& comm, Ready ready);

  ipc::AreaView view_;
  size_t bytes_ = 0;
  int rank_ = 0;
  std::mutex postMutex_;  // one issuing call at a time: the sequence follows the calls' order
  std::mutex mutex_;      // guards next_ and pending_
  uint64_t next_ = 0;     // the sequence of the next counted collective
  std::deque<Op> pending_;
  size_t handingOver_ = 0;  // taken from pending_, not yet submitted to the daemon
};

}  // namespace hc::client
