#include "client/src/submit.h"

#include <algorithm>
#include <map>
#include <new>
#include <span>
#include <string>

#include "client/src/dtype.h"
#include "client/src/group.h"
#include "client/src/small_ops.h"
#include "client/src/staging.h"
#include "client/src/stream_ops.h"

namespace hc::client {
namespace {

using ipc::OpType;

const char* opName(uint8_t op) { return hc::opName(static_cast<OpType>(op)); }

// The call's own checks, before anything is placed or allocated.
Status checkCall(const ipc::SubmitEntry& e, int rank, int nranks, BufferArg send, BufferArg recv) {
  const auto type = static_cast<OpType>(e.op);
  const std::string name = opName(e.op);
  if (movesData(type) && !dtypeFrom(e.dtype)) {
    return invalidArgument(name + ": dtype " + std::to_string(e.dtype) + " is not an hc_dtype_t");
  }
  if (send.bytes == kBytesOverflow || recv.bytes == kBytesOverflow) {
    return invalidArgument(name + ": count " + std::to_string(e.count) +
                           " overflows the size of a buffer");
  }
  if ((hasRoot(type) || isPointToPoint(type)) && (e.root < 0 || e.root >= nranks)) {
    return invalidArgument(name + ": " + (isPointToPoint(type) ? "peer " : "root ") +
                           std::to_string(e.root) + " is out of range for " +
                           std::to_string(nranks) + " ranks");
  }
  if (isPointToPoint(type) && e.root == rank && !groupOpen()) {
    // The daemon pairs a send to oneself with the receive of the same group: alone it would
    // wait forever.
    return invalidArgument(name + (type == OpType::Send ? " to" : " from") + " itself (rank " +
                           std::to_string(rank) +
                           ") must be in a group (hc_group_start/end) with its matching " +
                           (type == OpType::Send ? "hc_recv" : "hc_send"));
  }
  return okStatus();
}

// Which side of an entry a buffer argument fills.
enum class Side { Send, Recv };

// Segment memory: a direct reference. Other host memory: by address when the daemon attaches to
// this process's memory, else pending staging. Absent: no buffer.
// Device memory: by (region, offset) of its registered allocation.
enum class Residence { None, Segment, Attached, Host, Device };

struct Placement {
  Residence at = Residence::None;
  DeviceRuntime* runtime = nullptr;  // Device
  DevicePointer device;              // Device
};

Result<Placement> residenceOf(Connection& conn, const char* which, BufferArg b) {
  if (b.bytes == 0) return Placement{};
  auto in = conn.inSegment(b.ptr, b.bytes);
  if (!in.isOk())
    return Status{in.status().code(), std::string(which) + " " + in.status().message()};
  if (*in) return Placement{Residence::Segment};
  for (DeviceRuntime* rt : deviceRuntimes()) {
    Placement p{Residence::Device, rt};
    if (rt->lookup(b.ptr, &p.device)) return p;
  }
  return Placement{conn.crossMemoryAttach() ? Residence::Attached : Residence::Host};
}

// The protocol minor an entry needs from the daemon.
uint16_t minorNeeded(const ipc::SubmitEntry& e) {
  return e.op >= static_cast<uint8_t>(OpType::AllToAll) || e.flags != 0 ? 1 : 0;
}

Status checkUnit(std::span<Submission> unit) {
  CommState* comm = unit.front().comm.get();
  if (unit.size() > ipc::kMaxGroupOps) {
    return invalidArgument("a group holds " + std::to_string(unit.size()) +
                           " operations on one communicator; at most " +
                           std::to_string(ipc::kMaxGroupOps) + " are allowed");
  }
  HC_RETURN_IF_ERROR(checkUsable(comm));
  for (const Submission& sub : unit) {
    // The unit's entries carry kEntryGroupMore when it holds more than one.
    uint16_t need = std::max<uint16_t>(minorNeeded(sub.entry), unit.size() > 1 ? 1 : 0);
    if (comm->conn->daemonMinor() < need) {
      return invalidArgument(std::string(unit.size() > 1 ? "groups" : opName(sub.entry.op)) +
                             " need protocol 1." + std::to_string(need) +
                             "; this hetero-commd speaks 1." +
                             std::to_string(comm->conn->daemonMinor()) + ": update the daemon");
    }
  }
  return okStatus();
}

// Blocks while user memory of sub awaits the results of an earlier staged operation.
Status waitForEarlierWrites(const Submission& sub) {
  Connection& conn = *sub.comm->conn;
  const PendingWrites& writes = conn.pendingWrites();
  if (!sub.staging->mustWaitFor(writes)) return okStatus();
  return conn.waitUntil([&] { return !sub.staging->mustWaitFor(writes); }, sub.comm.get());
}

// Orders subs into one unit per communicator, in the order of first appearance, posting order
// inside each, and returns the units.
std::vector<std::span<Submission>> splitIntoUnits(std::vector<Submission>& subs) {
  if (subs.size() == 1) return {std::span<Submission>(subs)};  // the common case: no group
  std::map<const CommState*, size_t> unitIndex;
  for (const Submission& sub : subs) unitIndex.try_emplace(sub.comm.get(), unitIndex.size());
  std::stable_sort(subs.begin(), subs.end(), [&](const Submission& a, const Submission& b) {
    return unitIndex.at(a.comm.get()) < unitIndex.at(b.comm.get());
  });
  std::vector<std::span<Submission>> units;
  for (size_t begin = 0; begin < subs.size();) {
    size_t end = begin + 1;
    while (end < subs.size() && subs[end].comm == subs[begin].comm) ++end;
    units.emplace_back(subs.data() + begin, end - begin);
    begin = end;
  }
  return units;
}

}  // namespace

ipc::BufferRef stagedRef(uint64_t relative) {
  ipc::BufferRef ref{};
  ref.kind = static_cast<uint8_t>(ipc::MemKind::Segment);
  ref.offset = relative;
  return ref;
}

ipc::BufferRef noBufferRef() {
  ipc::BufferRef ref{};
  ref.kind = static_cast<uint8_t>(ipc::MemKind::Segment);
  ref.offset = ipc::kNoBuffer;
  return ref;
}

ipc::BufferRef processMemoryRef(const void* p) {
  ipc::BufferRef ref{};
  ref.kind = static_cast<uint8_t>(ipc::MemKind::ProcessMemory);
  ref.offset = reinterpret_cast<uintptr_t>(p);
  return ref;
}

Status placeBuffers(Connection& conn, Submission* sub, BufferArg send, BufferArg recv,
                    DeviceRuntime** bufferRuntime) {
  auto sendAt = residenceOf(conn, "send buffer", send);
  if (!sendAt.isOk()) return sendAt.status();
  auto recvAt = residenceOf(conn, "recv buffer", recv);
  if (!recvAt.isOk()) return recvAt.status();
  const bool sendHost = sendAt->at == Residence::Host;
  const bool recvHost = recvAt->at == Residence::Host;
  if (sendHost || recvHost) {
    sub->staging = std::make_shared<Staging>(
        &conn.staging(), sendHost ? send.ptr : nullptr, sendHost ? send.bytes : 0,
        recvHost ? const_cast<void*>(recv.ptr) : nullptr, recvHost ? recv.bytes : 0);
  }
  auto refFor = [&](const Placement& at, BufferArg b, Side side) -> Result<ipc::BufferRef> {
    switch (at.at) {
      case Residence::None:
        return noBufferRef();
      case Residence::Segment:
        return conn.bufferRef(b.ptr, b.bytes);
      case Residence::Attached:
        return processMemoryRef(b.ptr);
      case Residence::Device: {
        auto ref = conn.deviceRef(at.runtime, at.device, b.ptr, b.bytes, sub);
        if (!ref.isOk()) {
          return Status{ref.status().code(), std::string(side == Side::Send ? "send" : "recv") +
                                                 " buffer: " + ref.status().message()};
        }
        return ref;
      }
      case Residence::Host:
        return stagedRef(side == Side::Send ? sub->staging->sendOffset()
                                            : sub->staging->recvOffset());
    }
    return noBufferRef();
  };
  auto s = refFor(*sendAt, send, Side::Send);
  if (!s.isOk()) return s.status();
  auto r = refFor(*recvAt, recv, Side::Recv);
  if (!r.isOk()) return r.status();
  sub->entry.send = *s;
  sub->entry.recv = *r;
  sub->sendStaged = sendHost;
  sub->recvStaged = recvHost;
  *bufferRuntime = sendAt->runtime != nullptr ? sendAt->runtime : recvAt->runtime;
  return okStatus();
}

Status chooseStream(const CommState& comm, DeviceRuntime* bufferRuntime, void* stream,
                    Submission* sub) {
  DeviceRuntime* ordering = comm.streamRuntime.load(std::memory_order_relaxed);
  if (ordering == nullptr && stream != nullptr && bufferRuntime != nullptr &&
      bufferRuntime->ownsStream(stream)) {
    ordering = bufferRuntime;
  }
  if (ordering == nullptr) return okStatus();
  HC_RETURN_IF_ERROR(ordering->checkNotCapturing(stream));
  sub->runtime = ordering;
  sub->stream = stream;
  return okStatus();
}

bool takesSmallArea(const CommState& comm, const Submission& sub, BufferArg send, BufferArg recv,
                    hc_stream_t stream) {
  for (BufferArg b : {send, recv}) {
    if (b.bytes == 0) continue;
    if (b.ptr == nullptr) return false;  // placeBuffers refuses it with the usual words
    for (DeviceRuntime* rt : deviceRuntimes()) {
      DevicePointer at;
      if (rt->lookup(b.ptr, &at)) return false;
    }
  }
  if (stream != nullptr || comm.streamRuntime.load() != nullptr) return false;
  return sub.deviceScalar == nullptr && (sub.entry.flags & ipc::kEntryScalarInBuffer) == 0;
}

hc_status_t rejectOp(const Status& s, CommState* comm) {
  failGroup(s);
  return fail(s, comm);
}

hc_status_t postOp(hc_comm_t comm, ipc::SubmitEntry e, BufferArg send, BufferArg recv, int redop,
                   hc_stream_t stream, hc_request_t* req) {
  auto c = usableComm(comm);
  if (!c.isOk()) return rejectOp(c.status(), comm != nullptr ? comm->state.get() : nullptr);
  const std::shared_ptr<CommState>& state = *c;
  Submission sub;
  sub.entry = e;
  sub.entry.commHandle = state->handle.load();
  sub.comm = state;
  Status s = checkCall(e, state->rank.load(), state->nranks.load(), send, recv);
  if (s.isOk()) s = applyRedop(*state, redop, &sub);
  SmallOpArea* area = state->area.get();
  // Inside a group it goes with the group to the daemon, and the other ranks' follow it there.
  // Device memory, a stream or a scalar read from memory take the daemon too.
  const bool small = s.isOk() && area != nullptr && !groupOpen() && area->fits(sub.entry) &&
                     takesSmallArea(*state, sub, send, recv, stream);
  DeviceRuntime* bufferRuntime = nullptr;
  if (s.isOk() && !small) {
    s = placeBuffers(*state->conn, &sub, send, recv, &bufferRuntime);
    if (s.isOk()) s = chooseStream(*state, bufferRuntime, stream, &sub);
    if (s.isOk()) s = checkDeviceScalar(sub);
    if (!s.isOk()) s = Status{s.code(), std::string(opName(e.op)) + ": " + s.message()};
  }
  if (!s.isOk()) return rejectOp(s, state.get());

  sub.request = makeRequest(state, req != nullptr);
  if (sub.recvStaged) sub.request->staging = sub.staging;
  // The handle exists before the submission, so a submitted operation always has one.
  hc_request* handle = nullptr;
  if (req != nullptr) {
    handle = new (std::nothrow) hc_request{sub.request};
    if (handle == nullptr) {
      Status oom{Code::NoResource, "out of memory"};
      finishRequest(sub.request, oom, {}, FailureSeenBy::Caller);
      return rejectOp(oom, state.get());
    }
  }
  if (small) {
    sub.request->smallOp = true;
    s = area->post(state, sub.entry, send, recv, sub.request);
    if (!s.isOk()) {
      delete handle;
      return fail(s, state.get());
    }
    if (req != nullptr) *req = handle;
    return HC_OK;
  }
  if (area != nullptr) {
    s = area->beforeDaemonOp(*state, static_cast<OpType>(e.op));
    if (!s.isOk()) {
      finishRequest(sub.request, s, {}, FailureSeenBy::Caller);
      delete handle;
      return fail(s, state.get());
    }
    sub.request->daemonOp = true;
    state->daemonOps.fetch_add(1);
  }
  if (groupOpen()) {
    recordInGroup(std::move(sub));
  } else if (sub.onStream()) {
    s = submitOnStream(std::move(sub));
    if (!s.isOk()) {
      delete handle;
      return fail(s, state.get());
    }
  } else {
    std::vector<Submission> one;
    one.push_back(std::move(sub));
    s = submitNow(one);
    if (!s.isOk()) {
      delete handle;
      return fail(s, state.get());
    }
  }
  if (req != nullptr) *req = handle;
  return HC_OK;
}

Status submitNow(std::vector<Submission>& subs) {
  if (subs.empty()) return okStatus();
  std::vector<std::span<Submission>> units = splitIntoUnits(subs);

  Status s;
  for (auto unit : units) {
    if (s.isOk()) s = checkUnit(unit);
  }
  // Staged memory is read now and written at completion: first let earlier operations finish
  // writing memory this batch touches, then make this batch's own writes known to later ones.
  for (Submission& sub : subs) {
    if (s.isOk() && sub.staging) s = waitForEarlierWrites(sub);
  }
  for (Submission& sub : subs) {
    if (s.isOk() && sub.staging) sub.staging->trackWrites(&sub.comm->conn->pendingWrites());
  }
  for (Submission& sub : subs) {
    if (s.isOk()) s = prepareSubmission(sub);
  }
  const bool onStreams =
      std::any_of(subs.begin(), subs.end(), [](const Submission& sub) { return sub.onStream(); });
  if (s.isOk() && onStreams) s = prepareGroupStreams(subs);
  for (auto unit : units) {
    if (!s.isOk()) break;
    for (size_t i = 0; i < unit.size(); ++i) {
      unit[i].entry.flags &= static_cast<uint8_t>(~ipc::kEntryGroupMore);
      if (i + 1 < unit.size()) unit[i].entry.flags |= ipc::kEntryGroupMore;
    }
    s = unit.front().comm->conn->submitUnit(unit);
  }
  if (s.isOk() && onStreams) orderGroupStreams(subs);
  if (!s.isOk()) {
    // Entries already pushed stay pending in the connection until the daemon completes them;
    // their requests complete now, like the rest, with the error the caller returns.
    for (Submission& sub : subs) finishRequest(sub.request, s, {}, FailureSeenBy::Caller);
  }
  return s;
}

Result<RequestPtr> submitControl(Connection& conn, const ipc::SubmitEntry& e,
                                 const std::shared_ptr<CommState>& comm, bool tracked) {
  Submission sub;
  sub.entry = e;
  sub.comm = comm;
  sub.request = makeRequest(comm, tracked);
  Status s = conn.submitUnit({&sub, 1});
  if (!s.isOk()) {
    finishRequest(sub.request, s, {}, FailureSeenBy::Caller);
    return s;
  }
  return sub.request;
}

Status prepareSubmission(Submission& sub) {
  if (!sub.staging) return okStatus();
  HC_RETURN_IF_ERROR(sub.staging->prepare());
  if (sub.sendStaged) sub.entry.send.offset += sub.staging->blockOffset();
  if (sub.recvStaged) sub.entry.recv.offset += sub.staging->blockOffset();
  sub.sendStaged = sub.recvStaged = false;
  return okStatus();
}

}  // namespace hc::client
