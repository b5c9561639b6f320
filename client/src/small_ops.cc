#include "client/src/small_ops.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "client/src/comm_state.h"
#include "client/src/submit.h"
#include "common/ipc/ring.h"
#include "common/reduce/reduce.h"
#include "common/vocabulary.h"

namespace hc::client {
namespace {

// Every area of this process, for progressAll(): a thread waiting on one communicator keeps the
// small ops of the others moving (a process holding several ranks waits on them in turn).
std::mutex registryMutex;
std::vector<std::weak_ptr<SmallOpArea>> registry;

std::vector<std::shared_ptr<SmallOpArea>> liveAreas() {
  std::vector<std::shared_ptr<SmallOpArea>> out;
  std::lock_guard<std::mutex> lock(registryMutex);
  std::erase_if(registry, [](const std::weak_ptr<SmallOpArea>& w) { return w.expired(); });
  for (const auto& w : registry) {
    if (auto area = w.lock()) out.push_back(std::move(area));
  }
  return out;
}

bool hasAreaRoot(ipc::OpType op) {
  return op == ipc::OpType::Broadcast || op == ipc::OpType::Reduce;
}
bool reduces(ipc::OpType op) {
  return op == ipc::OpType::AllReduce || op == ipc::OpType::Reduce ||
         op == ipc::OpType::ReduceScatter;
}

}  // namespace

Result<std::shared_ptr<SmallOpArea>> SmallOpArea::attach(UniqueFd fd, uint64_t bytes, int rank,
                                                         int nranks) {
  if (nranks < 2 || nranks > ipc::kAreaMaxRanks || rank < 0 || rank >= nranks ||
      bytes != ipc::areaBytes(nranks)) {
    return internalError("hetero-commd granted a small-operation area of " + std::to_string(bytes) +
                         " bytes for rank " + std::to_string(rank) + " of " +
                         std::to_string(nranks));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return systemError("mmap small-operation area", errno);
  // A forked child must not write its parent's slots.
  ::madvise(base, bytes, MADV_DONTFORK);
  std::shared_ptr<SmallOpArea> area(new SmallOpArea());
  area->view_.base = static_cast<uint8_t*>(base);
  area->view_.nranks = nranks;
  area->bytes_ = bytes;
  area->rank_ = rank;
  const ipc::AreaHeader* h = area->view_.header();
  if (h->magic != ipc::kAreaMagic || h->nranks != static_cast<uint32_t>(nranks) ||
      h->depth != ipc::kAreaDepth || h->slotBytes != ipc::kAreaSlotBytes) {
    return internalError("the small-operation area hetero-commd granted has another layout");
  }
  std::lock_guard<std::mutex> lock(registryMutex);
  registry.push_back(area);
  return area;
}

SmallOpArea::~SmallOpArea() {
  if (view_.base != nullptr) ::munmap(view_.base, bytes_);
}

bool SmallOpArea::counts(ipc::OpType op) {
  switch (op) {
    case ipc::OpType::AllReduce:
    case ipc::OpType::Broadcast:
    case ipc::OpType::Reduce:
    case ipc::OpType::AllGather:
    case ipc::OpType::ReduceScatter:
    case ipc::OpType::Barrier:
      return true;
    default:
      return false;
  }
}

bool SmallOpArea::fits(const ipc::SubmitEntry& e) const {
  const auto op = static_cast<ipc::OpType>(e.op);
  if (!counts(op)) return false;
  if (op == ipc::OpType::Barrier) return true;
  const size_t elem = dtypeSize(static_cast<Dtype>(e.dtype));
  if (elem == 0 || e.count > ipc::kAreaSlotBytes) return false;
  uint64_t bytes = e.count * elem;
  if (op == ipc::OpType::ReduceScatter) bytes *= static_cast<uint64_t>(view_.nranks);
  return bytes <= ipc::kAreaSlotBytes;
}

Status SmallOpArea::failure() const {
  const ipc::AreaHeader* h = view_.header();
  const uint32_t f = h->failed.load(std::memory_order_acquire);
  if (f == 0) return okStatus();
  if (f >= ipc::kAreaFailedByRank) {
    return unavailable("rank " + std::to_string(f - ipc::kAreaFailedByRank) +
                       " aborted the communicator");
  }
  char text[sizeof(h->reason)];
  std::memcpy(text, h->reason, sizeof(text));
  text[sizeof(text) - 1] = '\0';
  const int32_t code = h->code;
  const bool valid = code > static_cast<int32_t>(Code::NoResource) && code < kNumCodes;
  return Status{valid ? static_cast<Code>(code) : Code::Unavailable, text};
}

template <typename Ready>
Status SmallOpArea::waitFor(CommState& comm, Ready ready) {
  using Clock = std::chrono::steady_clock;
  ipc::AreaHeader* h = view_.header();
  const auto spinUntil = Clock::now() + std::chrono::microseconds(comm.conn->spinMicros());
  for (;;) {
    if (ready()) return okStatus();
    HC_RETURN_IF_ERROR(failure());
    if (comm.aborted.load()) return unavailable("the communicator was aborted");
    if (comm.conn->dead()) return unavailable("hetero-commd is gone: the connection to it closed");
    if (Clock::now() < spinUntil) {
      // The ranks and the daemon often outnumber the cores: let the rank we wait for run.
      ::sched_yield();
      continue;
    }
    // Sleep. Publishing the sleeper before the last check means a contribution made after it
    // either changed `event` (the wait returns at once) or sees the sleeper and wakes it.
    h->sleepers.fetch_add(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t seen = h->event.load(std::memory_order_acquire);
    if (!ready() && failure().isOk() && !comm.aborted.load()) {
      // Bounded: a dead daemon is noticed through the socket, and an operation handed to the
      // daemon completes through the completion ring, neither of which bumps `event`.
      ipc::futexWait(&h->event, seen, 10'000'000);
    }
    h->sleepers.fetch_sub(1);
    comm.conn->poll();
  }
}

Status SmallOpArea::post(const std::shared_ptr<CommState>& comm, const ipc::SubmitEntry& e,
                         BufferArg send, BufferArg recv, const RequestPtr& request) {
  std::lock_guard<std::mutex> order(postMutex_);
  // One order per communicator: its operations in the daemon finish first, then its earlier
  // small ops (this one may read what they write).
  Status s;
  if (comm->daemonOps.load() != 0) {
    s = comm->conn->waitUntil([&] { return comm->daemonOps.load() == 0; }, comm.get());
  }
  if (s.isOk()) {
    s = waitFor(*comm, [&] {
      progress();
      std::lock_guard<std::mutex> lock(mutex_);
      return pending_.empty() && handingOver_ == 0;
    });
  }
  if (s.isOk()) s = failure();
  uint64_t seq = 0;
  if (s.isOk()) {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = next_++;
  }
  // The row is free once every rank finished reading the operation depth before this one.
  auto rowFree = [&] {
    progress();
    if (seq < ipc::kAreaDepth) return true;
    for (int q = 0; q < view_.nranks; ++q) {
      if (view_.line(q)->done.load(std::memory_order_acquire) < seq - ipc::kAreaDepth + 1) {
        return false;
      }
    }
    return true;
  };
  if (s.isOk()) s = waitFor(*comm, rowFree);
  if (!s.isOk()) {
    finishRequest(request, s, {}, FailureSeenBy::Caller);
    return s;
  }
  ipc::AreaSlot* slot = view_.slot(seq, rank_);
  slot->op = e.op;
  slot->dtype = e.dtype;
  slot->redop = e.redop;
  slot->premul = e.redop == static_cast<uint8_t>(RedOp::PreMulSum) ? 1 : 0;
  slot->root = e.root;
  slot->count = e.count;
  slot->scalar = e.scalar;
  if (send.bytes != 0) std::memcpy(view_.data(seq, rank_), send.ptr, send.bytes);
  // Release: a rank that sees the stamp sees the descriptor and the data.
  slot->stamp.store(seq + 1, std::memory_order_release);
  ipc::AreaRankLine* line = view_.line(rank_);
  line->smallIssued.fetch_add(1, std::memory_order_relaxed);
  line->issued.store(seq + 1, std::memory_order_release);
  ipc::areaPublish(view_.header());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Op op;
    op.seq = seq;
    op.entry = e;
    op.send = send.ptr;
    op.sendBytes = send.bytes;
    op.recv = const_cast<void*>(recv.ptr);
    op.recvBytes = recv.bytes;
    op.request = request;
    op.comm = comm;
    pending_.push_back(std::move(op));
  }
  progress();
  return okStatus();
}

Status SmallOpArea::beforeDaemonOp(CommState& comm, ipc::OpType op) {
  std::lock_guard<std::mutex> order(postMutex_);
  HC_RETURN_IF_ERROR(waitFor(comm, [&] {
    progress();
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_.empty() && handingOver_ == 0;
  }));
  if (!counts(op)) return okStatus();
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = next_++;
  }
  // This rank reads no slot of this operation: it is done with its row at once.
  view_.line(rank_)->issued.store(seq + 1, std::memory_order_release);
  view_.line(rank_)->done.store(seq + 1, std::memory_order_release);
  ipc::areaPublish(view_.header());
  return okStatus();
}

int SmallOpArea::readiness(const Op& op) const {
  const ipc::SubmitEntry& e = op.entry;
  const auto type = static_cast<ipc::OpType>(e.op);
  for (int q = 0; q < view_.nranks; ++q) {
    const ipc::AreaSlot* s = view_.slot(op.seq, q);
    if (s->stamp.load(std::memory_order_acquire) != op.seq + 1) {
      if (view_.line(q)->issued.load(std::memory_order_acquire) <= op.seq) return 0;
      // Rank q issued operation seq. Its stamp is stored before `issued`, so read again now: still
      // missing, q took it to the daemon.
      if (s->stamp.load(std::memory_order_acquire) != op.seq + 1) return -1;
    }
    if (s->op != e.op ||
        (type != ipc::OpType::Barrier && (s->dtype != e.dtype || s->count != e.count)) ||
        (hasAreaRoot(type) && s->root != e.root) || (reduces(type) && s->redop != e.redop)) {
      return -1;
    }
  }
  return 1;
}

void SmallOpArea::compute(const Op& op) const {
  const ipc::SubmitEntry& e = op.entry;
  const auto type = static_cast<ipc::OpType>(e.op);
  if (type == ipc::OpType::Barrier || op.recvBytes == 0) return;
  const int n = view_.nranks;
  const auto dtype = static_cast<Dtype>(e.dtype);
  const size_t bytes = e.count * dtypeSize(dtype);
  switch (type) {
    case ipc::OpType::Broadcast:
      std::memcpy(op.recv, view_.data(op.seq, e.root), bytes);
      return;
    case ipc::OpType::AllGather:
      for (int q = 0; q < n; ++q) {
        std::memcpy(static_cast<uint8_t*>(op.recv) + bytes * q, view_.data(op.seq, q), bytes);
      }
      return;
    default:
      break;
  }
  // AllReduce, Reduce (the root), ReduceScatter: inputs in rank order, so every rank computes
  // bitwise the same result.
  const void* inputs[ipc::kAreaMaxRanks];
  uint64_t scalars[ipc::kAreaMaxRanks];
  const size_t offset = type == ipc::OpType::ReduceScatter ? bytes * rank_ : 0;
  for (int q = 0; q < n; ++q) {
    inputs[q] = view_.data(op.seq, q) + offset;
    scalars[q] = view_.slot(op.seq, q)->scalar;
  }
  void* outputs[1] = {op.recv};
  coll::ReduceSpec spec{};
  spec.dtype = dtype;
  spec.redop = static_cast<RedOp>(e.redop);
  spec.inputs = inputs;
  spec.nInputs = static_cast<size_t>(n);
  spec.outputs = outputs;
  spec.nOutputs = 1;
  spec.scalars = spec.redop == RedOp::PreMulSum ? scalars : nullptr;
  spec.nRanks = static_cast<size_t>(n);
  coll::reduceRange(spec, 0, e.count);
}

bool SmallOpArea::progress() {
  std::vector<std::pair<RequestPtr, Status>> finished;
  std::vector<Op> handOver;
  bool remaining = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!pending_.empty()) {
      Op& op = pending_.front();
      const int ready = readiness(op);
      // An operation whose contributions are all there finishes even when the communicator
      // failed since (a rank that finished it too and destroyed its handle); the others fail.
      if (ready <= 0) {
        Status failed = failure();
        if (!failed.isOk()) {
          for (Op& doomed : pending_) finished.emplace_back(doomed.request, failed);
          pending_.clear();
          break;
        }
      }
      if (ready == 0) break;
      if (ready > 0) compute(op);
      view_.line(rank_)->done.store(op.seq + 1, std::memory_order_release);
      ipc::areaPublish(view_.header());
      if (ready > 0) {
        view_.line(rank_)->smallDone.fetch_add(1, std::memory_order_relaxed);
        finished.emplace_back(op.request, okStatus());
      } else {
        // The daemon's record counts it from now on.
        view_.line(rank_)->smallIssued.fetch_sub(1, std::memory_order_relaxed);
        handOver.push_back(std::move(op));
      }
      pending_.pop_front();
    }
    handingOver_ += handOver.size();
    remaining = !pending_.empty();
  }
  for (auto& [request, status] : finished) finishRequest(request, status);
  for (Op& op : handOver) {
    // The daemon matches it with the other ranks' operation seq and, as the descriptors
    // disagree, fails the communicator with the same words on every rank.
    Submission sub;
    sub.entry = op.entry;
    sub.comm = op.comm;
    sub.request = op.request;
    DeviceRuntime* runtime = nullptr;
    Status s = placeBuffers(*op.comm->conn, &sub, {op.send, op.sendBytes}, {op.recv, op.recvBytes},
                            &runtime);
    if (s.isOk()) {
      if (sub.recvStaged) sub.request->staging = sub.staging;
      sub.request->daemonOp = true;
      op.comm->daemonOps.fetch_add(1);
      std::vector<Submission> one;
      one.push_back(std::move(sub));
      (void)submitNow(one);  // on failure it finishes the request with the error
    } else {
      finishRequest(op.request, s);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    --handingOver_;
  }
  return remaining;
}

Status SmallOpArea::wait(CommState& comm, const RequestPtr& request) {
  Status s = waitFor(comm, [&] {
    progress();
    comm.conn->reap();
    return request->done.load(std::memory_order_acquire);
  });
  // A failure of the area has finished the request with it; report that.
  if (!s.isOk() && request->done.load(std::memory_order_acquire)) return okStatus();
  return s;
}

void SmallOpArea::abandon(const Status& why) {
  ipc::AreaHeader* h = view_.header();
  uint32_t expected = 0;
  h->failed.compare_exchange_strong(expected, ipc::kAreaFailedByRank + static_cast<uint32_t>(rank_),
                                    std::memory_order_release);
  ipc::areaPublish(h);
  std::deque<Op> doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    doomed.swap(pending_);
  }
  for (Op& op : doomed) finishRequest(op.request, why);
}

void SmallOpArea::progressAll() {
  for (const auto& area : liveAreas()) area->progress();
}

bool SmallOpArea::anyPending() {
  for (const auto& area : liveAreas()) {
    std::lock_guard<std::mutex> lock(area->mutex_);
    if (!area->pending_.empty()) return true;
  }
  return false;
}

}  // namespace hc::client
