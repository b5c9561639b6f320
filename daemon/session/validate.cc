#include "daemon/session/validate.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace hc::session {
namespace {

// Checks that [ref.offset, +bytes) lies in one live allocation, and resolves it.
Result<uint8_t*> resolveBuffer(const char* which, const ipc::BufferRef& ref, uint64_t bytes,
                               const Session& session) {
  if (ref.kind != static_cast<uint8_t>(ipc::MemKind::Segment)) {
    return invalidArgument(std::string(which) + " buffer has unknown memory kind " +
                           std::to_string(ref.kind));
  }
  if (ref.offset == ipc::kNoBuffer || !session.allocator()->contains(ref.offset, bytes)) {
    return invalidArgument(std::string(which) + " buffer [offset " + std::to_string(ref.offset) +
                           ", " + std::to_string(bytes) +
                           " bytes) is not inside an allocation of the client's segment");
  }
  return session.segment()->at(ref.offset);
}

bool checkedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace

std::string describeOp(const PendingOp& op) {
  if (op.type == OpType::CommSplit) {
    return "comm_split(color=" + std::to_string(op.splitColor) +
           ", key=" + std::to_string(op.splitKey) + ")";
  }
  std::string s = std::string(opName(op.type)) + "(count=" + std::to_string(op.count);
  if (op.type != OpType::Barrier) s += std::string(", ") + dtypeName(op.dtype);
  if (isReduction(op.type)) s += std::string(", ") + redOpName(op.redop);
  if (hasRoot(op.type)) s += ", root=" + std::to_string(op.root);
  if (isPointToPoint(op.type)) s += ", peer=" + std::to_string(op.root);
  return s + ")";
}

namespace {

// describeOp's fields: the name, then each comma-separated field inside the parentheses.
std::vector<std::string> fieldsOf(const std::string& description) {
  std::vector<std::string> fields;
  std::string field;
  for (char c : description) {
    if (c == '(' || c == ',' || c == ')') {
      if (!field.empty()) fields.push_back(field);
      field.clear();
    } else if (c != ' ' || !field.empty()) {
      field += c;
    }
  }
  if (!field.empty()) fields.push_back(field);
  return fields;
}

}  // namespace

std::string mismatchText(const std::string& what, int rankA, const std::string& a,
                         const std::string& aVerb, int rankB, const std::string& b,
                         const std::string& bVerb) {
  const std::vector<std::string> fa = fieldsOf(a), fb = fieldsOf(b);
  std::string difference;
  for (size_t i = 0; i < std::max(fa.size(), fb.size()); ++i) {
    const std::string x = i < fa.size() ? fa[i] : "nothing";
    const std::string y = i < fb.size() ? fb[i] : "nothing";
    if (x != y) {
      difference = ", " + x + " vs " + y;
      break;
    }
  }
  return what + " mismatch" + difference + ": rank " + std::to_string(rankA) + " " + aVerb + " " +
         a + ", rank " + std::to_string(rankB) + " " + bVerb + " " + b;
}

Result<std::vector<int>> readExcludeList(const ipc::SubmitEntry& e, const Session& session,
                                         int nranks, int self) {
  std::vector<int> ranks;
  if (e.count >= static_cast<uint64_t>(nranks)) {
    return invalidArgument("comm shrink: " + std::to_string(e.count) + " ranks excluded of " +
                           std::to_string(nranks) + ": none would remain");
  }
  if (e.count == 0) return ranks;
  auto at = resolveBuffer("exclude list", e.send, e.count * sizeof(int32_t), session);
  if (!at.isOk()) return at.status();
  ranks.resize(e.count);
  for (size_t i = 0; i < ranks.size(); ++i) {
    int32_t r;
    // Client memory: read once, with no alignment assumed.
    std::memcpy(&r, *at + i * sizeof(int32_t), sizeof(r));
    if (r < 0 || r >= nranks) {
      return invalidArgument("comm shrink: excluded rank " + std::to_string(r) +
                             " is out of range for " + std::to_string(nranks) + " ranks");
    }
    ranks[i] = r;
  }
  std::sort(ranks.begin(), ranks.end());
  if (auto d = std::adjacent_find(ranks.begin(), ranks.end()); d != ranks.end()) {
    return invalidArgument("comm shrink: rank " + std::to_string(*d) + " is excluded twice");
  }
  if (std::binary_search(ranks.begin(), ranks.end(), self)) {
    return invalidArgument("comm shrink: rank " + std::to_string(self) +
                           " excludes itself; an excluded rank does not call shrink");
  }
  return ranks;
}

Result<PendingOp> resolveOp(const ipc::SubmitEntry& e, const std::shared_ptr<Session>& session,
                            int rank, int nranks) {
  PendingOp op;
  op.requestId = e.requestId;
  op.session = session;
  op.segment = session->segment();
  op.type = static_cast<OpType>(e.op);  // Engine::accept() checked it
  op.root = e.root;
  op.count = e.count;
  op.buffers.scalar = e.scalar;
  // SmallOps belongs to CommInit, which never comes here: on anything else it is unknown.
  const uint8_t known = ipc::kKnownEntryFlags & ~ipc::kEntrySmallOps;
  if ((e.flags & ~known) != 0) {
    return invalidArgument("unknown entry flags " + std::to_string(e.flags & ~known));
  }
  if (op.type == OpType::Barrier) {
    op.count = 0;
    return op;
  }
  if (op.type == OpType::CommSplit) {
    if (e.splitColor < 0 && e.splitColor != ipc::kSplitNoColor) {
      return invalidArgument("comm split: color " + std::to_string(e.splitColor) +
                             " is negative (only HC_SPLIT_NOCOLOR may be)");
    }
    op.splitColor = e.splitColor;
    op.splitKey = e.splitKey;
    op.count = 0;
    op.root = -1;
    return op;
  }
  if (isPointToPoint(op.type) && (e.root < 0 || e.root >= nranks)) {
    return invalidArgument(std::string(opName(op.type)) + ": peer " + std::to_string(e.root) +
                           " is out of range for " + std::to_string(nranks) + " ranks");
  }
  auto dtype = checkedDtype(e.dtype);
  if (!dtype.isOk()) return dtype.status();
  op.dtype = *dtype;
  if (isReduction(op.type)) {
    HC_RETURN_IF_ERROR(checkReduction(e.dtype, e.redop));
    op.redop = *redOpFrom(e.redop);
  }
  if (hasRoot(op.type)) {
    if (e.root < 0 || e.root >= nranks) {
      return invalidArgument("root " + std::to_string(e.root) + " is out of range for " +
                             std::to_string(nranks) + " ranks");
    }
  } else if (!isPointToPoint(op.type)) {
    op.root = -1;
  }
  if ((e.flags & ipc::kEntryScalarInBuffer) != 0) {
    if (op.redop != RedOp::PreMulSum) {
      return invalidArgument("a scalar in a buffer is only meaningful for a pre-multiplied sum");
    }
    ipc::BufferRef ref{};
    ref.offset = e.scalar;
    auto p = resolveBuffer("scalar", ref, dtypeSize(op.dtype), *session);
    if (!p.isOk()) return p.status();
    op.scalarSource = *p;
  }
  uint64_t bytes = 0;
  uint64_t wide = 0;
  if (!checkedMul(e.count, dtypeSize(op.dtype), &bytes) ||
      !checkedMul(bytes, static_cast<uint64_t>(nranks), &wide)) {
    return invalidArgument("count " + std::to_string(e.count) + " overflows the buffer size");
  }
  if (e.count == 0) return op;

  uint64_t sendBytes = bytes;
  uint64_t recvBytes = bytes;
  bool useSend = true;
  bool useRecv = true;
  switch (op.type) {
    case OpType::Broadcast:
      useSend = rank == e.root;
      break;
    case OpType::Reduce:
      useRecv = rank == e.root;
      break;
    case OpType::AllGather:
      recvBytes = wide;
      break;
    case OpType::ReduceScatter:
      sendBytes = wide;
      break;
    case OpType::AllToAll:
      sendBytes = recvBytes = wide;
      break;
    case OpType::Gather:
      useRecv = rank == e.root;
      recvBytes = wide;
      break;
    case OpType::Scatter:
      useSend = rank == e.root;
      sendBytes = wide;
      break;
    case OpType::Send:
      useRecv = false;
      break;
    case OpType::Recv:
      useSend = false;
      break;
    default:
      break;
  }
  auto place = [&](const char* which, const ipc::BufferRef& ref, uint64_t n, const uint8_t** seg,
                   PendingOp::ClientRange* range, DeviceRegionPtr* region) -> Status {
    if (ref.kind == static_cast<uint8_t>(ipc::MemKind::Device)) {
      DeviceRegionPtr r = session->deviceRegion(ref.region);
      if (r == nullptr) {
        return invalidArgument(std::string(which) + " buffer names device region " +
                               std::to_string(ref.region) +
                               ", which this client has not registered");
      }
      if (ref.offset > r->bytes() || n > r->bytes() - ref.offset) {
        return invalidArgument(std::string(which) + " buffer [offset " +
                               std::to_string(ref.offset) + ", " + std::to_string(n) +
                               " bytes) overruns " + r->describe() + " of " +
                               std::to_string(r->bytes()) + " bytes");
      }
      *range = {ref.offset, n};
      *region = std::move(r);
      return okStatus();
    }
    if (ref.kind == static_cast<uint8_t>(ipc::MemKind::ProcessMemory)) {
      if (session->processMemory() == nullptr) {
        return invalidArgument(std::string(which) +
                               " buffer is in the client's own memory, but cross-memory attach "
                               "was not enabled for this client");
      }
      if (ref.offset + n < ref.offset) {
        return invalidArgument(std::string(which) + " buffer range wraps around");
      }
      *range = {ref.offset, n};
      op.processMemory = session->processMemory();
      return okStatus();
    }
    auto p = resolveBuffer(which, ref, n, *session);
    if (!p.isOk()) return p.status();
    *seg = *p;
    return okStatus();
  };
  if (useSend) {
    HC_RETURN_IF_ERROR(
        place("send", e.send, sendBytes, &op.buffers.send, &op.sendRange, &op.sendRegion));
  }
  if (useRecv) {
    const uint8_t* recv = nullptr;
    HC_RETURN_IF_ERROR(place("recv", e.recv, recvBytes, &recv, &op.recvRange, &op.recvRegion));
    op.buffers.recv = const_cast<uint8_t*>(recv);
  }
  const bool sameMemory =
      e.send.kind == e.recv.kind &&
      (e.send.kind != static_cast<uint8_t>(ipc::MemKind::Device) || e.send.region == e.recv.region);
  if (useSend && useRecv && sameMemory) {
    // NCCL's in-place rules: the exact in-place arrangement, or no overlap at all.
    uint64_t s = e.send.offset, r = e.recv.offset;
    bool overlap = s < r + recvBytes && r < s + sendBytes;
    bool inPlace = s == r;
    if (op.type == OpType::AllGather || op.type == OpType::Gather) {
      inPlace = s == r + rank * bytes;
    }
    if (op.type == OpType::ReduceScatter || op.type == OpType::Scatter) {
      inPlace = r == s + rank * bytes;
    }
    // Every rank's block j goes to rank j while rank j's block lands here: in place would
    // overwrite blocks before they are read.
    if (op.type == OpType::AllToAll) inPlace = false;
    if (overlap && op.type == OpType::AllToAll) {
      return invalidArgument("alltoall: send and recv buffers overlap (it cannot run in place)");
    }
    if (overlap && !inPlace) {
      return invalidArgument(std::string(opName(op.type)) +
                             ": send and recv buffers partially overlap (only the exact in-place "
                             "arrangement may overlap)");
    }
  }
  return op;
}

}  // namespace hc::session
