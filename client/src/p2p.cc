// Point-to-point entry points: hc_send, hc_recv, and hc_alltoallv built from them as a group of
// sends and receives to every peer (itself included), returned as one composite request.
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "client/src/comm_state.h"
#include "client/src/dtype.h"
#include "client/src/group.h"
#include "client/src/staging.h"
#include "client/src/submit.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

using ipc::OpType;

ipc::SubmitEntry p2pEntry(OpType type, size_t count, hc_dtype_t dtype, int peer) {
  ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(type);
  e.dtype = static_cast<uint8_t>(dtype);
  e.count = count;
  e.root = peer;
  return e;
}

// One peer's part of an hc_alltoallv buffer, in bytes from the buffer's start.
struct Part {
  uint64_t count = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// Reads counts[] and displs[] (elements) into parts, and the extent they span into *extent.
Status readParts(const char* side, const size_t* counts, const size_t* displs, int nranks,
                 size_t size, std::vector<Part>* parts, uint64_t* extent) {
  *extent = 0;
  parts->assign(static_cast<size_t>(nranks), Part{});
  for (int peer = 0; peer < nranks; ++peer) {
    Part& p = (*parts)[static_cast<size_t>(peer)];
    p.count = counts[peer];
    uint64_t end = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(displs[peer]), size, &p.offset) ||
        __builtin_mul_overflow(p.count, size, &p.bytes) ||
        __builtin_add_overflow(p.offset, p.bytes, &end)) {
      return invalidArgument("hc_alltoallv: " + std::string(side) + " count " +
                             std::to_string(counts[peer]) + " at displacement " +
                             std::to_string(displs[peer]) + " for peer " + std::to_string(peer) +
                             " overflows the size of a buffer");
    }
    if (p.count > 0 && end > *extent) *extent = end;
  }
  return okStatus();
}

// Where the parts of one side live: the segment (by reference), device memory (by region), the
// process's own memory (by address, cross-memory attach) or staging (relative).
struct SideLayout {
  const uint8_t* base = nullptr;
  bool attached = false;
  bool staged = false;
  uint64_t stagedAt = 0;             // the side's start in the staging block
  DeviceRuntime* runtime = nullptr;  // device memory of this runtime
  DevicePointer device;              // ... in this allocation
};

Result<ipc::BufferRef> partRef(Connection& conn, const SideLayout& side, const Part& p,
                               Submission* sub) {
  if (side.runtime != nullptr) {
    return conn.deviceRef(side.runtime, side.device, side.base + p.offset, p.bytes, sub);
  }
  if (side.attached) return processMemoryRef(side.base + p.offset);
  if (side.staged) return stagedRef(side.stagedAt + p.offset);
  return conn.bufferRef(side.base + p.offset, p.bytes);
}

// Posts the parts of an hc_alltoallv in a group of their own, nested in the caller's if one is
// open, so they are matched as one unit whichever way the caller groups them.
Status postAlltoallv(const std::shared_ptr<CommState>& state, const RequestPtr& composite,
                     const std::vector<Part>& sends, const std::vector<Part>& recvs,
                     const SideLayout& sendSide, const SideLayout& recvSide,
                     const std::shared_ptr<Staging>& staging, hc_dtype_t dtype, void* stream) {
  Connection& conn = *state->conn;
  (void)groupStart();
  auto post = [&](OpType type, int peer, const Part& p) -> Status {
    if (p.count == 0) return okStatus();  // both sides know: the peer posts no part either
    Submission sub;
    sub.entry = p2pEntry(type, p.count, dtype, peer);
    sub.entry.commHandle = state->handle.load();
    sub.comm = state;
    const bool isSend = type == OpType::Send;
    auto ref = partRef(conn, isSend ? sendSide : recvSide, p, &sub);
    if (!ref.isOk()) return ref.status();
    (isSend ? sub.entry.send : sub.entry.recv) = *ref;
    (isSend ? sub.entry.recv : sub.entry.send) = noBufferRef();
    const SideLayout& side = isSend ? sendSide : recvSide;
    if (side.staged) {
      sub.staging = staging;
      (isSend ? sub.sendStaged : sub.recvStaged) = true;
    }
    // Stream-ordered like any operation of a group (stream_ops.h).
    HC_RETURN_IF_ERROR(chooseStream(*state, side.runtime, stream, &sub));
    // Parts report to the composite, never as asynchronous errors of their own.
    sub.request = makeRequest(state, /*tracked=*/true);
    addPart(composite, sub.request);
    recordInGroup(std::move(sub));
    return okStatus();
  };
  Status s;
  for (int peer = 0; peer < static_cast<int>(sends.size()) && s.isOk(); ++peer) {
    s = post(OpType::Send, peer, sends[static_cast<size_t>(peer)]);
    if (s.isOk()) s = post(OpType::Recv, peer, recvs[static_cast<size_t>(peer)]);
  }
  if (!s.isOk()) failGroup(s);
  sealComposite(composite);
  return groupEnd();
}

}  // namespace
}  // namespace hc::client

using namespace hc::client;

extern "C" {

hc_status_t hc_send(const void* sendbuff, size_t count, hc_dtype_t dtype, int peer, hc_comm_t comm,
                    hc_stream_t stream, hc_request_t* req) {
  return postOp(comm, p2pEntry(OpType::Send, count, dtype, peer), {sendbuff, bytesOf(count, dtype)},
                {}, HC_SUM, stream, req);
}

hc_status_t hc_recv(void* recvbuff, size_t count, hc_dtype_t dtype, int peer, hc_comm_t comm,
                    hc_stream_t stream, hc_request_t* req) {
  return postOp(comm, p2pEntry(OpType::Recv, count, dtype, peer), {},
                {recvbuff, bytesOf(count, dtype)}, HC_SUM, stream, req);
}

hc_status_t hc_alltoallv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                         void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                         hc_dtype_t dtype, hc_comm_t comm, hc_stream_t stream, hc_request_t* req) {
  auto c = usableComm(comm);
  if (!c.isOk()) return rejectOp(c.status(), comm != nullptr ? comm->state.get() : nullptr);
  const std::shared_ptr<CommState>& state = *c;
  CommState* st = state.get();
  const size_t size = elemSize(dtype);
  if (size == 0) {
    return rejectOp(hc::invalidArgument("hc_alltoallv: dtype " + std::to_string(dtype) +
                                        " is not an hc_dtype_t"),
                    st);
  }
  if (sendcounts == nullptr || sdispls == nullptr || recvcounts == nullptr || rdispls == nullptr) {
    return rejectOp(hc::invalidArgument("hc_alltoallv: counts and displacements must not be NULL"),
                    st);
  }
  const int nranks = st->nranks.load();
  std::vector<Part> sends, recvs;
  uint64_t sendExtent = 0, recvExtent = 0;
  hc::Status s = readParts("send", sendcounts, sdispls, nranks, size, &sends, &sendExtent);
  if (s.isOk()) s = readParts("recv", recvcounts, rdispls, nranks, size, &recvs, &recvExtent);
  if (!s.isOk()) return rejectOp(s, st);

  // Whole extents decide where each side lives: one staging serves every part of a side.
  Connection& conn = *st->conn;
  SideLayout sendSide{static_cast<const uint8_t*>(sendbuff)};
  SideLayout recvSide{static_cast<const uint8_t*>(recvbuff)};
  for (auto [side, extent, name] : {std::tuple{&sendSide, sendExtent, "send buffer "},
                                    std::tuple{&recvSide, recvExtent, "recv buffer "}}) {
    if (extent == 0) continue;
    for (DeviceRuntime* rt : deviceRuntimes()) {
      if (rt->lookup(side->base, &side->device)) side->runtime = rt;
    }
    if (side->runtime != nullptr) continue;  // each part is checked against the allocation
    auto in = conn.inSegment(side->base, extent);
    if (!in.isOk()) {
      return rejectOp(hc::Status{in.status().code(),
                                 "hc_alltoallv: " + std::string(name) + in.status().message()},
                      st);
    }
    // Attached: the daemon writes only the parts, so the gaps keep the caller's data unaided.
    side->attached = !*in && conn.crossMemoryAttach();
    side->staged = !*in && !side->attached;
  }
  std::shared_ptr<Staging> staging;
  if (sendSide.staged || recvSide.staged) {
    staging = std::make_shared<Staging>(
        &conn.staging(), sendSide.staged ? sendbuff : nullptr, sendSide.staged ? sendExtent : 0,
        recvSide.staged ? recvbuff : nullptr, recvSide.staged ? recvExtent : 0);
    sendSide.stagedAt = staging->sendOffset();
    recvSide.stagedAt = staging->recvOffset();
  }

  RequestPtr composite = makeComposite(state, req != nullptr);
  if (recvSide.staged) {
    // Only the parts come back: the gaps between them keep what the caller's buffer held.
    std::vector<std::pair<uint64_t, uint64_t>> written;
    for (const Part& p : recvs) {
      if (p.count > 0) written.emplace_back(p.offset, p.bytes);
    }
    staging->copyOutOnly(std::move(written));
    composite->staging = staging;
  }
  hc_request* handle = nullptr;
  if (req != nullptr) {
    handle = new (std::nothrow) hc_request{composite};
    if (handle == nullptr) {
      hc::Status oom{hc::Code::NoResource, "out of memory"};
      sealComposite(composite);  // no parts yet: finishes it
      return rejectOp(oom, st);
    }
  }
  s = postAlltoallv(state, composite, sends, recvs, sendSide, recvSide, staging, dtype, stream);
  if (!s.isOk()) {
    delete handle;
    return fail(s, st);
  }
  if (req != nullptr) *req = handle;
  return HC_OK;
}

}  // extern "C"
