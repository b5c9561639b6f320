// ScheduleRunner: the one NetOp implementation. It walks a Schedule (schedule.h) over a
// Transport without blocking: posts receives and sends in (step, chunk) order within the
// in-flight windows, tests them, reduces or forwards what arrived, and on any failure cancels
// what is pending, notifies the nodes it exchanges with, and reports once every request is final.
//
// Failure notices. At start() the runner posts one small receive per node it exchanges with,
// tagged as a notice (net_tags.h). A node whose op fails sends each of them its Status code
// and words there (op_notice.h; one that fails because of a notice passes that one on), so a
// failure spreads along the op's links (a ring passes it on node by node) and every node waiting on
// the failed one fails within a bounded number of progress rounds, instead of waiting for data that
// will never come. When the op succeeds it cancels these receives, which costs one more
// transport->progress() round. A notice sent to a node that already finished the op stays in that
// node's unexpected queue until the communicator's identity is retired there, when the executor
// drops it as stale (comm_identities.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/coll/net/net_op.h"
#include "daemon/coll/net/op_notice.h"
#include "daemon/coll/net/schedule.h"

namespace hc::coll::net {

class ScheduleRunner final : public NetOp {
 public:
  // The spec was validated by makeNetOp(); the schedule's regions lie in its buffers.
  ScheduleRunner(const NetOpSpec& spec, Schedule schedule);
  // The transport must hold none of the op's buffers any more: destroying an op whose
  // progress() has not reported a final outcome after start() is a broken contract (fatal).
  ~ScheduleRunner() override;

  // hc::coll::net::NetOp
  Status start() override;
  Result<bool> progress() override;
  void abort(Status why) override;
  const char* algorithm() const override { return schedule_.algorithm; }

 private:
  enum class Phase : uint8_t { Created, Running, Draining, Finished };
  struct Cursor {
    size_t step = 0;
    size_t chunk = 0;
  };
  struct PendingSend {
    transport::RequestId id;
    int node;
    const uint8_t* begin;  // the bytes the transport still reads
    const uint8_t* end;
    size_t offset;  // of the chunk in its step's region (where a ring wraps, not begin's)
  };
  struct PendingRecv {
    transport::RequestId id;
    size_t step;
    size_t chunk;
    int slot;  // scratch slot for a Combine; -1 for Direct
    bool arrived = false;
  };
  struct Watch {
    transport::RequestId id;
    size_t link;  // index into linkedNodes_ and noticeInboxes_
  };

  // One pass of the Running phase; an error fails the op.
  [[nodiscard]] Status advance();
  [[nodiscard]] Status testWatches();
  [[nodiscard]] Status testSends();
  [[nodiscard]] Status testReceives();
  void applyArrivedReceives();
  [[nodiscard]] Status postReceives();
  [[nodiscard]] Status postSends();
  bool dataDone() const;

  // Moves to Draining with `why` as the outcome: sends the notices, then cancels every pending
  // request.
  void fail(Status why);
  // Tests every request still pending in Draining; true once none is left.
  bool drain();

  // A region of `bytes` is cut into chunkCount(bytes) chunks; chunk k is [chunkBegin, chunkEnd):
  // chunkBytes_ each but the last, which is longer when the tail alone would be under minTail_.
  size_t chunkCount(size_t bytes) const;
  size_t chunkBegin(size_t chunk) const { return chunk * chunkBytes_; }
  size_t chunkEnd(size_t bytes, size_t chunk) const;
  // Where the bytes at `offset` of a region starting at `base` lie: base + offset, or in a ring
  // (NetOpSpec::ringBytes), base + offset % ring.
  template <typename T>
  T* placed(T* base, size_t offset) const {
    return base + (ring_ != 0 ? offset % ring_ : offset);
  }
  // Moves the cursor to the next chunk of a step that has chunks in `counts`.
  void nextChunk(Cursor& cursor, const std::vector<size_t>& counts) const;
  // Whether a send of `step` or of an earlier step has yet to finish reading some of
  // [begin, end): it is pending, or not even posted. A receive of `step` may write there only
  // once this is false (later steps' sends are the ones meant to read what it writes).
  bool sendsStillRead(size_t step, const uint8_t* begin, const uint8_t* end) const;
  uint8_t* slot(int index) {
    return scratch_ ? scratch_.get() + static_cast<size_t>(index) * slotBytes_ : nullptr;
  }
  Status atNode(int node, const Status& status) const;

  transport::Transport& transport_;  // borrowed
  const std::vector<transport::PeerId> peers_;
  const uint32_t self_;
  const uint64_t comm_;
  const uint64_t seq_;
  const transport::MemoryKind memory_;  // of the op's buffer (send/recv); slots are host memory
  // Send/recv: a last chunk shorter than this joins the one before it. Either end of a transfer
  // may lend device memory, where a short (inline) message cannot land; both ends cut alike.
  const size_t minTail_;
  const std::function<size_t()> sendReady_;             // NetOpSpec::sendReady
  const std::function<void(size_t, size_t)> onLanded_;  // NetOpSpec::onLanded
  const std::function<void(size_t, size_t)> onSent_;    // NetOpSpec::onSent
  const std::function<size_t()> recvReady_;             // NetOpSpec::recvReady
  const size_t ring_;                                   // NetOpSpec::ringBytes
  const uint8_t* const bufferStart_;                    // NetOpSpec::buffer: its offsets
  const Dtype dtype_;
  const RedOp redop_;           // between nodes (interNodeRedop)
  const bool divideWhenFinal_;  // Avg: the finalizing reduction divides by finalDivisor_
  const uint64_t finalDivisor_;
  const size_t elementBytes_;
  const size_t chunkBytes_;  // whole elements
  const size_t maxInFlight_;
  const Schedule schedule_;

  Phase phase_ = Phase::Created;
  Status outcome_;
  int failedNode_ = -1;  // the node whose request or notice failed the op, when one did

  std::vector<size_t> sendChunks_;          // per step; 0 when the step sends nothing
  std::vector<size_t> recvChunks_;          // per step; 0 when the step receives nothing
  std::vector<std::vector<bool>> applied_;  // per step with receives, per chunk
  Cursor nextSend_;
  Cursor nextRecv_;
  std::vector<uint64_t> sentOnLink_;      // per node: data messages posted to it so far
  std::vector<uint64_t> receivedOnLink_;  // per node: data receives posted from it so far
  std::vector<PendingSend> sends_;
  std::vector<PendingRecv> recvs_;

  // Scratch for Combine receives, allocated once at start().
  std::unique_ptr<uint8_t[]> scratch_;
  size_t slotBytes_ = 0;
  std::vector<int> freeSlots_;

  std::vector<int> linkedNodes_;         // every node this op exchanges with; none without notices
  std::vector<OpNotice> noticeInboxes_;  // per linked node: its notice lands here
  std::vector<Watch> watches_;           // notice receives still pending
  int noticeFrom_ = -1;                  // the link whose notice failed the op, when one did
  OpNotice outgoing_;                    // what our notices carry
  std::vector<transport::RequestId> noticeSends_;
};

}  // namespace hc::coll::net
