#include "daemon/coll/local_plan.h"

#include <algorithm>

#include "common/reduce/reduce.h"

namespace hc::coll {

LocalPlan::LocalPlan(const LocalOp& op, std::vector<RankBuffers> ranks, size_t pieceBytes)
    : op_(op), nranks_(ranks.size()) {
  const size_t esize = dtypeSize(op.dtype);
  const size_t n = ranks.size();
  const size_t bytes = op.count * esize;
  if (op.count == 0 || n == 0) return;
  switch (op.type) {
    case OpType::AllReduce:
    case OpType::Reduce: {
      Task t;
      t.reduce = true;
      t.units = op.count;
      for (const auto& r : ranks) {
        t.inputs.push_back(r.send);
        t.scalars.push_back(r.scalar);
      }
      if (op.type == OpType::AllReduce) {
        for (const auto& r : ranks) t.outputs.push_back(r.recv);
      } else {
        t.outputs.push_back(ranks[op.root].recv);
      }
      addTask(std::move(t), esize, pieceBytes);
      break;
    }
    case OpType::ReduceScatter: {
      // Rank i receives the reduction of block i of every rank's input.
      for (size_t i = 0; i < n; ++i) {
        Task t;
        t.reduce = true;
        t.units = op.count;
        for (const auto& r : ranks) {
          t.inputs.push_back(r.send + i * bytes);
          t.scalars.push_back(r.scalar);
        }
        t.outputs.push_back(ranks[i].recv);
        addTask(std::move(t), esize, pieceBytes);
      }
      break;
    }
    case OpType::Broadcast: {
      Task t;
      t.units = bytes;
      t.inputs.push_back(ranks[op.root].send);
      for (const auto& r : ranks) t.outputs.push_back(r.recv);
      addTask(std::move(t), 1, pieceBytes);
      break;
    }
    case OpType::AllGather: {
      // Block i of every rank's output is rank i's input.
      for (size_t i = 0; i < n; ++i) {
        Task t;
        t.units = bytes;
        t.inputs.push_back(ranks[i].send);
        for (const auto& r : ranks) t.outputs.push_back(r.recv + i * bytes);
        addTask(std::move(t), 1, pieceBytes);
      }
      break;
    }
    case OpType::AllToAll: {
      // Block j of rank i's input becomes block i of rank j's output.
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          Task t;
          t.units = bytes;
          t.inputs.push_back(ranks[i].send + j * bytes);
          t.outputs.push_back(ranks[j].recv + i * bytes);
          addTask(std::move(t), 1, pieceBytes);
        }
      }
      break;
    }
    case OpType::Gather: {
      // Block i of the root's output is rank i's input.
      for (size_t i = 0; i < n; ++i) {
        Task t;
        t.units = bytes;
        t.inputs.push_back(ranks[i].send);
        t.outputs.push_back(ranks[op.root].recv + i * bytes);
        addTask(std::move(t), 1, pieceBytes);
      }
      break;
    }
    case OpType::Scatter: {
      // Rank i's output is block i of the root's input.
      for (size_t i = 0; i < n; ++i) {
        Task t;
        t.units = bytes;
        t.inputs.push_back(ranks[op.root].send + i * bytes);
        t.outputs.push_back(ranks[i].recv);
        addTask(std::move(t), 1, pieceBytes);
      }
      break;
    }
    case OpType::Send: {
      // A matched transfer: ranks = {the sender, the receiver}.
      HC_CHECK(n == 2);
      Task t;
      t.units = bytes;
      t.inputs.push_back(ranks[0].send);
      t.outputs.push_back(ranks[1].recv);
      addTask(std::move(t), 1, pieceBytes);
      break;
    }
    default:
      break;  // barrier, split: no data
  }
}

void LocalPlan::addTask(Task task, size_t unitBytes, size_t pieceBytes) {
  const size_t taskBytes = task.units * unitBytes;
  bytesMoved_ += taskBytes * (task.inputs.size() + task.outputs.size());
  // A piece covers pieceBytes of each buffer, in whole 4 KiB-aligned units so that two pieces
  // never share a cache line of an output.
  size_t unitsPerPiece = std::max<size_t>(1, pieceBytes / unitBytes);
  const size_t align = std::max<size_t>(1, 4096 / unitBytes);
  unitsPerPiece = (unitsPerPiece + align - 1) / align * align;
  const size_t index = tasks_.size();
  for (size_t b = 0; b < task.units; b += unitsPerPiece) {
    pieces_.push_back({index, b, std::min(task.units, b + unitsPerPiece)});
  }
  tasks_.push_back(std::move(task));
}

void LocalPlan::runPiece(size_t i) const {
  const Piece& p = pieces_[i];
  const Task& t = tasks_[p.task];
  if (t.reduce) {
    ReduceSpec spec{};
    spec.dtype = op_.dtype;
    spec.redop = op_.redop;
    spec.inputs = t.inputs.data();
    spec.nInputs = t.inputs.size();
    spec.outputs = t.outputs.data();
    spec.nOutputs = t.outputs.size();
    spec.scalars = op_.redop == RedOp::PreMulSum ? t.scalars.data() : nullptr;
    spec.nRanks = nranks_;
    reduceRange(spec, p.begin, p.end);
  } else {
    copyRange(t.inputs[0], t.outputs.data(), t.outputs.size(), p.begin, p.end);
  }
}

}  // namespace hc::coll
