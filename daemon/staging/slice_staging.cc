#include "daemon/staging/slice_staging.h"

#include <algorithm>
#include <cstring>

namespace hc::staging {
namespace {

// How many rank blocks one side of an op's buffers holds.
int blocksOf(OpType type, bool send, int nranks) {
  switch (type) {
    case OpType::AllToAll:
      return nranks;
    case OpType::AllGather:
    case OpType::Gather:
      return send ? 1 : nranks;
    case OpType::ReduceScatter:
    case OpType::Scatter:
      return send ? nranks : 1;
    default:
      return 1;
  }
}

uint64_t piecesBytes(const std::vector<SlicePiece>& pieces) {
  uint64_t n = 0;
  for (const auto& p : pieces) n += p.bytes;
  return n;
}

}  // namespace

bool sliceable(OpType type) {
  switch (type) {
    case OpType::AllReduce:
    case OpType::Broadcast:
    case OpType::Reduce:
    case OpType::AllGather:
    case OpType::ReduceScatter:
    case OpType::AllToAll:
    case OpType::Gather:
    case OpType::Scatter:
      return true;
    default:
      return false;
  }
}

uint64_t sliceCount(OpType type, int nranks, size_t elementBytes, uint64_t sliceBytes) {
  const uint64_t blocks =
      static_cast<uint64_t>(std::max(blocksOf(type, true, nranks), blocksOf(type, false, nranks)));
  return std::max<uint64_t>(1, sliceBytes / (elementBytes * blocks));
}

std::vector<SlicePiece> slicePieces(OpType type, bool send, int nranks, size_t elementBytes,
                                    uint64_t total, uint64_t first, uint64_t count) {
  std::vector<SlicePiece> pieces;
  const int blocks = blocksOf(type, send, nranks);
  for (int b = 0; b < blocks; ++b) {
    const SlicePiece p{(static_cast<uint64_t>(b) * total + first) * elementBytes,
                       count * elementBytes};
    // A slice of the whole count is one contiguous range: one piece, one copy.
    if (!pieces.empty() && pieces.back().offset + pieces.back().bytes == p.offset) {
      pieces.back().bytes += p.bytes;
    } else {
      pieces.push_back(p);
    }
  }
  return pieces;
}

SliceStaging::SliceStaging(OpType type, int nranks, size_t elementBytes, uint64_t total,
                           uint64_t perSlice, StagingPool* pool, DeviceCopier* copier)
    : type_(type),
      nranks_(nranks),
      esz_(elementBytes),
      total_(total),
      perSlice_(std::max<uint64_t>(perSlice, 1)),
      pool_(pool),
      copier_(copier) {}

SliceStaging::~SliceStaging() {
  // No copy may still use a buffer that goes back to the pool.
  if (unsettled_) [[maybe_unused]]
    Status s = copier_->drain();
  while (!staged_.empty()) release(staged_.begin()->first);
}

uint64_t SliceStaging::countOf(size_t k) const {
  const uint64_t first = k * perSlice_;
  return first >= total_ ? 0 : std::min(perSlice_, total_ - first);
}

Status SliceStaging::move(const Operand& op, bool send, const std::vector<SlicePiece>& pieces,
                          uint8_t* packed, bool toClient) {
  const OperandSide& side = send ? op.send : op.recv;
  uint64_t at = 0;
  for (const auto& piece : pieces) {
    uint8_t* local = packed + at;
    at += piece.bytes;
    if (side.onDevice()) {
      uint8_t* remote = side.region + side.address + piece.offset;
      HC_RETURN_IF_ERROR(toClient
                             ? copier_->enqueue(side.device, remote, local, piece.bytes, true)
                             : copier_->enqueue(side.device, local, remote, piece.bytes, false));
    } else if (side.used()) {
      const uint64_t address = side.address + piece.offset;
      HC_RETURN_IF_ERROR(toClient ? op.client->write(address, local, piece.bytes)
                                  : op.client->read(address, local, piece.bytes));
    } else if (toClient) {
      std::memcpy(op.buffers.recv + piece.offset, local, piece.bytes);
    } else {
      std::memcpy(local, (send ? op.buffers.send : op.buffers.recv) + piece.offset, piece.bytes);
    }
  }
  return okStatus();
}

Status SliceStaging::stageIn(const std::vector<Operand>& ops, size_t k,
                             std::vector<coll::RankBuffers>& bufs) {
  const uint64_t first = k * perSlice_;
  const uint64_t count = countOf(k);
  if (combine_) {
    // One packed send slice for the whole daemon, combined on a device.
    const auto pieces = slicePieces(type_, true, nranks_, esz_, total_, first, count);
    auto buffer = pool_->acquire(piecesBytes(pieces));
    if (!buffer.isOk()) return buffer.status();
    staged_[k].push_back({0, true, *buffer});
    if (failure_.isOk()) {
      unsettled_ = true;
      Status s = combine_(ops, first, count, buffer->data);
      if (!s.isOk()) failure_ = s;
    }
    for (auto& b : bufs) b.send = buffer->data;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const Operand& op = ops[i];
    for (const bool send : {true, false}) {
      if (send && combine_) continue;
      const bool device = (send ? op.send : op.recv).onDevice();
      const bool client = (send ? op.send : op.recv).used();
      const uint8_t* host = send ? op.buffers.send : op.buffers.recv;
      if (!device && !client && host == nullptr) continue;  // a side this rank does not use
      const auto pieces = slicePieces(type_, send, nranks_, esz_, total_, first, count);
      uint8_t* at = nullptr;
      if (!device && !client && pieces.size() == 1) {
        at = const_cast<uint8_t*>(host) + pieces.front().offset;  // mapped: used where it lies
      } else {
        auto buffer = pool_->acquire(piecesBytes(pieces));
        if (!buffer.isOk()) return buffer.status();
        staged_[k].push_back({i, send, *buffer});
        at = buffer->data;
        if (send && failure_.isOk()) {
          unsettled_ = true;
          Status s = move(op, true, pieces, at, false);
          if (!s.isOk()) failure_ = s;
        }
      }
      if (send) {
        bufs[i].send = at;
      } else {
        bufs[i].recv = at;
      }
    }
  }
  return okStatus();
}

void SliceStaging::stageOut(const std::vector<Operand>& ops, size_t k) {
  auto it = staged_.find(k);
  if (it == staged_.end()) return;
  const auto pieces = slicePieces(type_, false, nranks_, esz_, total_, k * perSlice_, countOf(k));
  for (const auto& s : it->second) {
    if (s.send || !failure_.isOk()) continue;
    unsettled_ = true;
    Status out = move(ops[s.op], false, pieces, s.buffer.data, true);
    if (!out.isOk()) failure_ = out;
  }
  stagedOut_.push_back(k);
}

void SliceStaging::settle() {
  if (unsettled_) {
    unsettled_ = false;
    Status landed = copier_->drain();
    if (!landed.isOk() && failure_.isOk()) failure_ = landed;
  }
  for (size_t k : stagedOut_) release(k);
  stagedOut_.clear();
}

void SliceStaging::release(size_t k) {
  auto it = staged_.find(k);
  if (it == staged_.end()) return;
  for (auto& s : it->second) pool_->release(s.buffer);
  staged_.erase(it);
}

}  // namespace hc::staging
