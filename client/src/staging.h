// Staging: host memory that is not in the segment, reached through a copy. The daemon sees only
// segment memory, so an operation on other host memory runs on a staging block of the segment:
// send data is copied in when the operation is submitted, results are copied out when it
// completes, before it is reported done. Segment memory (hc_mem_alloc) skips all of this.
//
// The pool keeps a few idle blocks so that a loop of operations on the same user buffers pays
// no allocation round trip to the daemon after the first call.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hc::client {

class Connection;

// An allocation of the segment heap.
struct SegmentBlock {
  void* ptr = nullptr;
  uint64_t offset = 0;  // from the segment start, as buffer references carry it
  uint64_t bytes = 0;   // as allocated (rounded up)
};

// Idle staging blocks of one connection. Thread-safe.
class StagingPool {
 public:
  // Borrowed: the connection owns the pool.
  explicit StagingPool(Connection* conn) : conn_(conn) {}

  // A block of at least `bytes`: an idle one that fits, else a new allocation.
  Result<SegmentBlock> acquire(uint64_t bytes);
  // Takes a block back. Never talks to the daemon, so it may run under the connection's locks;
  // blocks beyond the cache limits are freed by the next acquire() or trim().
  void release(const SegmentBlock& block);
  // Frees every idle block (one round trip each). With wait == false it gives up rather than
  // wait for another thread (library teardown).
  void trim(bool wait = true);

 private:
  void freeAll(std::vector<SegmentBlock> blocks);

  Connection* conn_;
  std::mutex mutex_;                            // guards the fields below
  std::multimap<uint64_t, SegmentBlock> idle_;  // by size
  uint64_t idleBytes_ = 0;
  std::vector<SegmentBlock> surplus_;  // returned beyond the limits, not yet freed
};

// User memory that submitted staged operations have yet to write (their copy-out is pending).
// Staging copies send data in at submission and results out at completion, so an operation
// touching such memory first waits for the writer: operations then see each other's results in
// issue order, as they do in segment memory, where the daemon runs them in order. Thread-safe.
class PendingWrites {
 public:
  void add(const void* owner, uintptr_t begin, uintptr_t end);
  void remove(const void* owner);
  bool overlaps(uintptr_t begin, uintptr_t end) const;

 private:
  struct Range {
    const void* owner;
    uintptr_t begin;
    uintptr_t end;
  };
  mutable std::mutex mutex_;
  std::vector<Range> ranges_;
};

// The staging of one operation (or of every part of one composite): the user's send extent and
// recv extent laid out in one block. Extents that overlap (in-place calls) share one region at
// their relative distance, so the daemon sees exactly the arrangement of the user's memory.
class Staging {
 public:
  // Either extent may be empty (that side is segment memory or absent).
  Staging(StagingPool* pool, const void* send, uint64_t sendBytes, void* recv, uint64_t recvBytes);
  ~Staging();  // returns the block to the pool
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Where the send / recv extent starts, relative to the block.
  uint64_t sendOffset() const { return sendOffset_; }
  uint64_t recvOffset() const { return recvOffset_; }

  // Acquires the block and copies the send extent in. Idempotent: the parts of a composite
  // share one staging and each prepares it.
  Status prepare();
  bool prepared() const { return block_.ptr != nullptr; }
  // The block's segment offset; valid once prepared.
  uint64_t blockOffset() const { return block_.offset; }
  // Limits the copy out to these [offset, offset + bytes) ranges of the recv extent: the parts
  // of an hc_alltoallv may leave gaps the daemon never writes, which must keep the user's data.
  void copyOutOnly(std::vector<std::pair<uint64_t, uint64_t>> ranges) {
    outRanges_ = std::move(ranges);
  }

  // Whether user memory this operation reads or writes awaits an earlier operation's results.
  bool mustWaitFor(const PendingWrites& writes) const;
  // Submitted: records the user memory this operation will write, until settle(). Idempotent.
  void trackWrites(PendingWrites* writes);
  // The operation finished: copies the results out when it succeeded, then stops tracking.
  void settle(bool succeeded);

 private:
  StagingPool* pool_;  // borrowed: pools live as long as their connection, which is never freed
  const void* send_;
  uint64_t sendBytes_;
  void* recv_;
  uint64_t recvBytes_;
  uint64_t sendOffset_ = 0;
  uint64_t recvOffset_ = 0;
  uint64_t totalBytes_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> outRanges_;  // of the recv extent
  PendingWrites* writes_ = nullptr;                       // borrowed, like pool_; set while tracked
  SegmentBlock block_;
};

}  // namespace hc::client
