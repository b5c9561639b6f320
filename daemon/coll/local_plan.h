// LocalPlan: one collective over the mapped buffers of every local rank, as independent pieces
// that any thread may run: the one-pass reduction (read every input chunk once, write the result
// to every output once) or the copies of broadcast and allgather.
// Depends on hc_common and reduce.h; knows nothing of sessions or sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/vocabulary.h"

namespace hc::coll {

struct LocalOp {
  OpType type;
  Dtype dtype = Dtype::Int8;
  RedOp redop = RedOp::Sum;
  int root = -1;
  uint64_t count = 0;  // as in the entry: allgather per-rank send, reduce-scatter per-rank recv
};

// One rank's resolved buffers. send/recv may be equal (in place) or null when unused.
struct RankBuffers {
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  uint64_t scalar = 0;  // PreMulSum scalar bits
};

class LocalPlan {
 public:
  // ranks[i] belongs to rank i; the descriptors were validated and agree across ranks. For a
  // transfer (type Send), ranks = {the sender's buffers, the receiver's}.
  // pieceBytes bounds the work of one piece, so large collectives spread over the pool.
  LocalPlan(const LocalOp& op, std::vector<RankBuffers> ranks, size_t pieceBytes);

  size_t pieces() const { return pieces_.size(); }
  // Thread-safe: pieces touch disjoint output ranges.
  void runPiece(size_t i) const;
  // Bytes read plus written, to choose between running inline and on the pool.
  uint64_t bytesMoved() const { return bytesMoved_; }

 private:
  struct Task {
    bool reduce = false;
    std::vector<const void*> inputs;  // reduce: every rank's input; copy: inputs[0] = source
    std::vector<void*> outputs;
    std::vector<uint64_t> scalars;
    size_t units = 0;  // reduce: elements; copy: bytes
  };
  struct Piece {
    size_t task;
    size_t begin;
    size_t end;
  };

  void addTask(Task task, size_t unitBytes, size_t pieceBytes);

  LocalOp op_;
  size_t nranks_;
  std::vector<Task> tasks_;
  std::vector<Piece> pieces_;
  uint64_t bytesMoved_ = 0;
};

}  // namespace hc::coll
