// NetOp: the inter-node part of one collective, run among the daemons of a communicator over a
// hc::transport::Transport, as a non-blocking state machine.
//
// The model. Each participating daemon is a "node", numbered 0..N-1. Before the NetOp starts,
// the node's local ranks were combined in one pass into ONE node buffer (the caller's); the NetOp
// exchanges chunks of that buffer with the other nodes and leaves the result in it. The caller
// names every other node by its PeerId on the Transport, and gives the communicator's identity
// and the operation's sequence number; tags are built with transport::makeTag() (layout of the
// chunk field in net_tags.h).
//
// Work goes start() -> progress() ... -> true or an error:
//   start()     posts the first receives and sends (nothing blocks);
//   progress()  tests this op's own requests, reduces or forwards what arrived, posts more;
//               it never calls Transport::progress(): driving the transport is the owner's job
//               (the progress thread alternates transport->progress() and op->progress());
//   abort(why)  makes the op stop: progress() then reports `why` (or a notice that came first).
// A failure anywhere (a peer reported Unavailable, a message of the wrong size, abort()) cancels
// the op's pending requests and sends a failure notice to every node this op exchanges with, so
// that a node waiting on us fails too instead of waiting forever; progress() reports the failure
// once the transport has made every request final. Buffers are lent to the transport until then:
// neither the node buffer nor the NetOp may go away before progress() returned true or an error.
//
// Threads: every call runs on the progress thread that owns the Transport endpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/vocabulary.h"
#include "daemon/transport/transport.h"

namespace hc::coll::net {

enum class NetOpKind : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Reduce,
  AllToAll,
  Gather,
  Scatter,
  Send,
  Recv,
  Barrier,
};
const char* netOpKindName(NetOpKind kind);

// How an allreduce runs among the nodes. The daemon maps HC_ALGO onto this (parseAllreduceAlgo).
enum class AllreduceAlgo : uint8_t {
  Auto,               // RecursiveDoubling below ringMinBytes, Ring at and above
  Ring,               // reduce-scatter + allgather around a ring: 2(N-1)/N of the buffer per node
  RecursiveDoubling,  // log2(N) full-buffer exchanges: fewest steps, for small messages
};
const char* allreduceAlgoName(AllreduceAlgo algo);
// "auto", "ring", "rd" or "recursive_doubling", in any case; InvalidArgument otherwise.
[[nodiscard]] Result<AllreduceAlgo> parseAllreduceAlgo(std::string_view name);

constexpr size_t kDefaultChunkBytes = 512 * 1024;
constexpr size_t kDefaultMaxInFlight = 4;
constexpr size_t kDefaultRingMinBytes = 256 * 1024;

struct NetOpOptions {
  // Unit of transfer and of reduction: a message carries at most this many bytes (rounded down
  // to whole elements). Several chunks in flight let the reduction of one overlap the wire time
  // of the next.
  size_t chunkBytes = kDefaultChunkBytes;
  // Posted receives, and posted sends, at most this many each at any time. Receives that are
  // reduced land in scratch slots of chunkBytes, one per receive in flight, allocated once per op.
  size_t maxInFlight = kDefaultMaxInFlight;
  AllreduceAlgo allreduceAlgo = AllreduceAlgo::Auto;
  size_t ringMinBytes = kDefaultRingMinBytes;  // Auto: the buffer size from which Ring is used
};

// Everything one NetOp needs, filled by the caller. Counts and offsets are in elements of dtype.
//
// Buffers and block layouts, per kind:
//   AllReduce      buffer: count elements; in: this node's contribution; out: the result.
//   Broadcast      buffer: count elements; the root's is sent, every other node's is overwritten.
//   Reduce         buffer: count elements; out: the result on the root. On every other node the
//                  buffer is scratch: it ends holding a partial result.
//   Send / Recv    buffer: count elements, sent to / received from node `root`.
//   Barrier        no buffer; returns once every node has entered.
//   ReduceScatter, AllGather, Gather, Scatter use one block layout, the same on every node:
//                  node i owns blockCounts[i] elements at blockOffsets[i] of every node's buffer
//                  (offsets default to the prefix sums of the counts, i.e. blocks in node order).
//                  A node hosting several ranks owns one block holding their blocks back to back
//                  (2 local ranks of c elements: blockCounts[i] = 2c); when the rank table
//                  interleaves nodes, the caller stages in node order and permutes locally while
//                  copying results out to its ranks, which it does anyway. Blocks must not overlap.
//     ReduceScatter  in: every block holds this node's contribution; out: block `self` holds
//                    the reduction of every node's block `self` (other blocks become scratch).
//     AllGather      in: block `self`; out: every block.
//     Gather         in: block `self`; out on the root: every block (other nodes: unchanged).
//     Scatter        in on the root: every block; out: block `self`.
//   AllToAll       sendBuffer holds, for each node d, sendCounts[d] elements at sendOffsets[d]
//                  destined to d; buffer receives, from each node s, blockCounts[s] elements at
//                  blockOffsets[s]. sendCounts[d] here must equal blockCounts[self] on node d
//                  (a mismatch fails the op with RemoteError). sendBuffer and buffer must not
//                  overlap. Offsets default to prefix sums.
//
// Reductions (AllReduce, ReduceScatter, Reduce) combine with redop across
// nodes. Avg and PreMulSum are a plain Sum between nodes: the caller's local step must apply the
// PreMulSum scalars, and for Avg must SUM its local ranks (not average them) and set finalDivisor
// to the number of ranks in the communicator; the last reduction of each element then divides
// once, with reduce.h's Avg rules (integers: sum, then divide truncating; floats: sum, then
// multiply by (T)(1.0 / finalDivisor); narrow floats in fp32, rounded once).
//
// Numerics. Every node ends an allreduce with the same bits: the ring computes each segment's
// final value once and then only copies it; in recursive doubling both partners of an exchange
// reduce the same two operands in the same order (the lower node's first), so even NaN payloads
// and max(-0, +0) agree. Which bits those are is fixed by the algorithm and N, not by timing;
// ring and recursive doubling may round float sums differently (they associate differently), and
// fp16/bf16/fp8 sums round to the dtype once per hop. Test data whose sums are exact in any
// order (DESIGN.md, Numerics) gives one answer everywhere.
struct NetOpSpec {
  NetOpKind kind = NetOpKind::AllReduce;
  transport::Transport* transport = nullptr;  // borrowed: the owner drives it and outlives the op
  std::vector<transport::PeerId> peers;       // peers[i] reaches node i; peers[self] is unused
  uint32_t self = 0;                          // this node's number
  uint64_t comm = 0;                          // the communicator's identity (transport.h, Tag)
  uint64_t seq = 0;  // names the op within the communicator (the owner's layout)
  Dtype dtype = Dtype::Int8;
  RedOp redop = RedOp::Sum;   // reductions only
  uint64_t finalDivisor = 0;  // Avg only: ranks in the communicator (>= 1)
  uint32_t root = 0;   // Broadcast/Reduce/Gather/Scatter root; Send: destination; Recv: source
  uint64_t count = 0;  // AllReduce, Broadcast, Reduce, Send, Recv
  void* buffer = nullptr;
  const void* sendBuffer = nullptr;    // AllToAll only
  std::vector<uint64_t> blockCounts;   // per node; see the layouts above
  std::vector<uint64_t> blockOffsets;  // per node, or empty for prefix sums
  std::vector<uint64_t> sendCounts;    // AllToAll: per destination node
  std::vector<uint64_t> sendOffsets;   // AllToAll: per destination node, or empty
  // Send/Recv: the memory `buffer` lies in, lent to the transport as it is (a device-direct
  // transfer; the transport must move that kind). Every other kind reads or combines its
  // buffers on the CPU, so Host only.
  transport::MemoryKind memory = transport::MemoryKind::Host;
  // Send only: how many bytes from the front of `buffer` may be read so far, for a buffer that is
  // still being filled (a staging copy out of a device); chunks beyond wait for it. Empty: all.
  // Called on the progress thread.
  std::function<size_t()> sendReady;
  // Recv only: told of each chunk of `buffer` that has landed, (offset, bytes), in any order, on
  // the progress thread, so that it can move on (a staging copy into a device) before the rest.
  std::function<void(size_t offset, size_t bytes)> onLanded;
  // Send only: told of each chunk whose send completed, (offset, bytes), in any order, on the
  // progress thread: its bytes in `buffer` may be overwritten.
  std::function<void(size_t offset, size_t bytes)> onSent;
  // Recv only: how many bytes from the front may be received into so far; chunks beyond wait.
  // Empty: all.
  std::function<size_t()> recvReady;
  // Send/Recv: > 0 makes `buffer` a ring: the chunk at offset o lies at buffer + o % ringBytes,
  // contiguous, so `buffer` must hold ringBytes + transport->directMinBytes() (a last chunk may be
  // that much longer). A multiple of options.chunkBytes. The owner keeps a lap from overwriting
  // bytes still in use, through sendReady and onSent, or recvReady and onLanded.
  size_t ringBytes = 0;
  // false: the op neither listens for nor sends failure notices (schedule_runner.h), for the
  // owner's own single transfers whose failure the owner reports itself (a communicator's
  // notices and their watches: a notice of theirs would speak for the communicator, which the
  // owner's own notice does, and for a transfer that no peer waits on as an op).
  bool failureNotices = true;
  NetOpOptions options;
};

// The operator nodes apply to each other's data: Sum for Avg and PreMulSum, redop otherwise.
RedOp interNodeRedop(RedOp redop);

class NetOp {
 public:
  virtual ~NetOp() = default;

  // Non-blocking. Allocates the op's scratch, does its local work (all-to-all's own block) and
  // posts the first requests. An error only for misuse (start() twice); communication failures
  // are reported by progress(). After abort() it does nothing.
  [[nodiscard]] virtual Status start() = 0;
  // Non-blocking; never sleeps. false: call again after the owner's next transport->progress().
  // true: done, the buffer holds the result. An error: the op failed (Unavailable when a node
  // went away or the op was aborted, here or on a node it exchanges with; RemoteError when a node
  // disagreed or failed otherwise) and every request is final. Once final, repeats the outcome.
  [[nodiscard]] virtual Result<bool> progress() = 0;
  // Non-blocking. Stops the op: progress() then reports `why` (which must not be Ok), or the
  // failure of a node whose notice had already arrived, as soon as every pending request is final.
  // No effect on an op that already finished. The owner may call it from the Transport's
  // peer-failure handler (same thread) for ops that involve that node.
  virtual void abort(Status why) = 0;

  // "allreduce_ring", "broadcast_chain", ...: for debug logs and the flight recorder.
  virtual const char* algorithm() const = 0;

  // True while the op waits on something that wakes no file descriptor of the owner (a device
  // copy it polls): the owner then sleeps only briefly between progress() calls.
  virtual bool pollSoon() const { return false; }
};
using NetOpPtr = std::unique_ptr<NetOp>;

// Validates the spec (InvalidArgument naming the field), picks the algorithm and builds the op.
// The spec's vectors are copied; its buffers and transport are borrowed.
[[nodiscard]] Result<NetOpPtr> makeNetOp(const NetOpSpec& spec);

}  // namespace hc::coll::net
