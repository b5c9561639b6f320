// SliceStaging: the operands of a collective that runs across daemons as a pipeline of slices
// (the CPU-forwarding path for device memory). Slice k covers elements [k*S, min((k+1)*S, count))
// of every rank block of the op's buffers: of the one block of an allreduce, broadcast or reduce
// buffer, of each of the nranks blocks of an allgather's receive buffer or of a reduce-scatter's
// send buffer, and so on. A slice's pieces are packed into a daemon buffer in block order, which
// is the layout of the same collective over that slice's count, so a slice runs as an ordinary
// NodePlan. While the daemons exchange slice k, the engine copies slice k+1 in and slice k-1 out
// (daemon/session/net_pipeline.cc): at most two slices are staged at once, double buffering.
//
// With combineSends(), the send side of a reduction is not staged per rank: a device combines
// the ranks' operands and one packed slice is staged for all of them (net_pipeline.cc).
//
// Memory the daemon maps (the client's segment) is used where it lies when a side's pieces are
// contiguous and copied otherwise; device memory and the client's own memory (cross-memory
// attach) are always copied. After the first failed copy nothing more is copied (the op fails on
// every rank; its results are undefined), but every slice still gets its buffers, so this daemon
// goes on exchanging slices with the others and nobody waits on it.
// Runs on the IPC thread. Depends on hc_device and hc_coll; the operands come as views
// (operand.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "common/status.h"
#include "common/vocabulary.h"
#include "daemon/coll/local_plan.h"
#include "daemon/staging/device_copier.h"
#include "daemon/staging/operand.h"
#include "daemon/staging/staging_pool.h"

namespace hc::staging {

// A byte range of one side of an op's buffers.
struct SlicePiece {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool operator==(const SlicePiece&) const = default;
};

// Collectives that can be cut into slices (every one with data; not barrier or transfers).
bool sliceable(OpType type);
// Elements per rank block in one slice, when a slice may stage about `sliceBytes` on its larger
// side: at least 1.
uint64_t sliceCount(OpType type, int nranks, size_t elementBytes, uint64_t sliceBytes);
// The byte ranges of the send side (send = true) or the receive side of the slice covering
// elements [first, first + count) of each block, for an op of `total` elements per block.
std::vector<SlicePiece> slicePieces(OpType type, bool send, int nranks, size_t elementBytes,
                                    uint64_t total, uint64_t first, uint64_t count);

class SliceStaging {
 public:
  // For a sliceable op of `total` (> 0) elements per block among `nranks` ranks, in slices of
  // `perSlice` (> 0) elements. The pool and copier outlive this object.
  SliceStaging(OpType type, int nranks, size_t elementBytes, uint64_t total, uint64_t perSlice,
               StagingPool* pool, DeviceCopier* copier);
  ~SliceStaging();
  SliceStaging(const SliceStaging&) = delete;
  SliceStaging& operator=(const SliceStaging&) = delete;

  size_t slices() const { return static_cast<size_t>((total_ + perSlice_ - 1) / perSlice_); }
  // Elements per block in slice k.
  uint64_t countOf(size_t k) const;

  // Points bufs[i] (ops[i]'s buffers; scalars already set) at slice k of ops[i]'s operands and
  // starts reading the send pieces in: device copies are enqueued, and have landed only after
  // settle(). A failed copy is kept in failure(), not returned: the slice still runs. An error
  // here means no staging memory could be had (the slice cannot run).
  [[nodiscard]] Status stageIn(const std::vector<Operand>& ops, size_t k,
                               std::vector<coll::RankBuffers>& bufs);
  // Combines the send operands of a slice on a device instead of staging each (device_reduce.h,
  // combineSlice): called by stageIn() with the ops, the slice's first element and count per
  // block, and the one packed host buffer every rank's send then points at; what it copies into
  // that buffer must have landed by settle(). Its error is kept in failure().
  using Combine = std::function<Status(const std::vector<Operand>& ops, uint64_t first,
                                       uint64_t count, uint8_t* out)>;
  void combineSends(Combine combine) { combine_ = std::move(combine); }

  // Starts writing slice k's receive pieces back; settle() waits for them and returns the
  // slice's buffers to the pool.
  void stageOut(const std::vector<Operand>& ops, size_t k);
  // Waits for the copies started since the last settle (into and out of devices, side by side);
  // a failure goes to failure(). Releases the slices staged out.
  void settle();
  // The first copy that failed (Ok while none has).
  const Status& failure() const { return failure_; }

 private:
  struct Staged {
    size_t op;
    bool send;
    StagingPool::Buffer buffer;
  };
  // Moves one side's pieces between the op's memory and the packed buffer `packed`.
  Status move(const Operand& op, bool send, const std::vector<SlicePiece>& pieces, uint8_t* packed,
              bool toClient);
  void release(size_t k);

  OpType type_;
  int nranks_;
  size_t esz_;
  uint64_t total_;
  uint64_t perSlice_;
  StagingPool* pool_;
  DeviceCopier* copier_;
  Combine combine_;                               // empty: every rank's send pieces are staged
  std::map<size_t, std::vector<Staged>> staged_;  // by slice
  std::vector<size_t> stagedOut_;  // slices whose buffers go back at the next settle()
  bool unsettled_ = false;         // device copies were enqueued since the last settle()
  Status failure_ = okStatus();
};

}  // namespace hc::staging
