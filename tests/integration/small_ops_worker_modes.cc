// hc_small_ops_worker's mixed-path and failure modes (see small_ops_worker.h): one rank taking a
// small collective to the daemon while the others started it in the area, descriptors that
// disagree, and a peer that leaves, dies or aborts while the others wait in the area.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hetero_comm/hc_sim.h"
#include "tests/integration/small_ops_worker.h"
#include "tests/integration/worker_modes.h"
#include "tests/integration/worker_values.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;

// Where one rank's buffers of one operation live, and how it issues the operation. Area: host
// memory (hc_mem_alloc), or Heap (malloc) on every rank. Sim: simulated device memory on rank
// `who`, which takes the daemon. Group: rank `who` issues it inside hc_group_start/end, which
// takes the daemon; GroupTwice issues two such allreduces in one group.
enum class Path { Area, Heap, Sim, Group, GroupTwice };
enum class Op { AllReduce, Broadcast, AllGather };

struct Step {
  Op op;
  Path path;
  int who;  // the rank that takes the daemon (-1 for last rank); unused for Area and Heap
};

constexpr int kLast = -1;
constexpr uint64_t kCount = 5;  // elements a rank contributes: 20 bytes of int32

// In an order that has every hand-over followed by work in the area.
const Step kSteps[] = {
    {Op::AllReduce, Path::Area, 0},
    {Op::AllReduce, Path::Sim, 0},
    {Op::AllReduce, Path::Heap, 0},
    {Op::AllReduce, Path::Sim, kLast},
    {Op::AllReduce, Path::Group, 0},
    {Op::AllReduce, Path::Area, 0},
    {Op::AllReduce, Path::Group, kLast},
    {Op::AllReduce, Path::GroupTwice, 0},
    {Op::Broadcast, Path::Sim, 0},
    {Op::Broadcast, Path::Area, kLast},
    {Op::AllGather, Path::Sim, kLast},
    {Op::AllGather, Path::Heap, 0},
    {Op::AllReduce, Path::GroupTwice, kLast},
    {Op::AllReduce, Path::Area, 0},
};

int opsOf(const Step& s) { return s.path == Path::GroupTwice ? 2 : 1; }
bool takesDaemon(const Step& s) {
  return s.path == Path::Sim || s.path == Path::Group || s.path == Path::GroupTwice;
}

// One buffer of one of the three kinds.
class MixedBuffer {
 public:
  enum class Kind { Shared, Heap, Sim };
  MixedBuffer(Kind kind, size_t bytes) : kind_(kind) {
    hc_status_t rc = HC_OK;
    switch (kind) {
      case Kind::Shared:
        rc = hc_mem_alloc(&p_, bytes);
        break;
      case Kind::Heap:
        p_ = std::malloc(bytes);
        break;
      case Kind::Sim:
        // Host-mapped (hc_sim.h): filled and checked in place.
        rc = hc_sim_malloc(&p_, bytes, HC_SIM_NVIDIA, 0);
        break;
    }
    if (rc != HC_OK) p_ = nullptr;
  }
  ~MixedBuffer() {
    if (p_ == nullptr) return;
    if (kind_ == Kind::Shared) (void)hc_mem_free(p_);
    if (kind_ == Kind::Heap) std::free(p_);
    if (kind_ == Kind::Sim) (void)hc_sim_free(p_);
  }
  MixedBuffer(const MixedBuffer&) = delete;
  MixedBuffer& operator=(const MixedBuffer&) = delete;
  int32_t* data() const { return static_cast<int32_t*>(p_); }

 private:
  Kind kind_;
  void* p_ = nullptr;
};

// One operation of a step on this rank: its buffers, request and what to expect.
struct MixedOp {
  Op op = Op::AllReduce;
  uint64_t seed = 0;
  int root = 0;
  std::unique_ptr<MixedBuffer> send, recv;
  hc_request_t req = nullptr;
};

uint64_t recvElems(Op op, int nranks) {
  return op == Op::AllGather ? kCount * static_cast<uint64_t>(nranks) : kCount;
}

int32_t in(uint64_t seed, int rank, uint64_t i, int nranks) {
  return inputValue<int32_t>(seed, rank, i, Red::Sum, nranks);
}

class MixedRun {
 public:
  MixedRun(hc_comm_t comm, const SmallOpsOptions& o) : comm_(comm), o_(o) {}

  // Issues step s (seeded by `seed`) on this rank; its operations are appended to *ops.
  bool issue(const Step& s, uint64_t seed, std::vector<MixedOp>* ops) {
    const int who = s.who == kLast ? o_.nranks - 1 : s.who;
    const bool special = takesDaemon(s) && o_.rank == who;
    using Kind = MixedBuffer::Kind;
    const Kind kind = s.path == Path::Heap             ? Kind::Heap
                      : special && s.path == Path::Sim ? Kind::Sim
                                                       : Kind::Shared;
    const bool group = special && (s.path == Path::Group || s.path == Path::GroupTwice);
    if (group && hc_group_start() != HC_OK) return failed("hc_group_start");
    bool ok = true;
    for (int k = 0; k < opsOf(s) && ok; ++k) {
      MixedOp& m = ops->emplace_back();
      m.op = s.op;
      m.seed = seed * 31 + static_cast<uint64_t>(k);
      m.root = who;
      m.send = std::make_unique<MixedBuffer>(kind, kCount * sizeof(int32_t));
      m.recv = std::make_unique<MixedBuffer>(kind, recvElems(s.op, o_.nranks) * sizeof(int32_t));
      if (m.send->data() == nullptr || m.recv->data() == nullptr) {
        ok = failed("allocating buffers");
        break;
      }
      for (uint64_t i = 0; i < kCount; ++i) m.send->data()[i] = in(m.seed, o_.rank, i, o_.nranks);
      for (uint64_t i = 0; i < recvElems(s.op, o_.nranks); ++i) m.recv->data()[i] = -12345;
      hc_status_t rc = HC_OK;
      switch (s.op) {
        case Op::AllReduce:
          rc = hc_allreduce(m.send->data(), m.recv->data(), kCount, HC_INT32, HC_SUM, comm_,
                            nullptr, &m.req);
          break;
        case Op::Broadcast:
          rc = hc_broadcast(m.send->data(), m.recv->data(), kCount, HC_INT32, m.root, comm_,
                            nullptr, &m.req);
          break;
        case Op::AllGather:
          rc = hc_allgather(m.send->data(), m.recv->data(), kCount, HC_INT32, comm_, nullptr,
                            &m.req);
          break;
      }
      if (rc != HC_OK) ok = failed("issuing an operation", rc);
    }
    if (group) {
      hc_status_t rc = hc_group_end();
      if (rc != HC_OK && ok) ok = failed("hc_group_end", rc);
    }
    return ok;
  }

  // Waits for op m and counts its wrong elements.
  bool finish(MixedOp& m, const char* what) {
    if (m.req != nullptr) {
      if (hc_status_t rc = waitFor(&m.req, 20000); rc != HC_OK) return failed(what, rc);
    }
    const int32_t* got = m.recv->data();
    for (uint64_t i = 0; i < recvElems(m.op, o_.nranks); ++i) {
      int32_t want = 0;
      if (m.op == Op::AllReduce) want = expectedReduction<int32_t>(m.seed, i, Red::Sum, o_.nranks);
      if (m.op == Op::Broadcast) want = in(m.seed, m.root, i, o_.nranks);
      if (m.op == Op::AllGather) {
        want = in(m.seed, static_cast<int>(i / kCount), i % kCount, o_.nranks);
      }
      if (got[i] != want && wrong_++ < 5) {
        std::printf("WRONG %s [%llu]: got %d, want %d\n", what, static_cast<unsigned long long>(i),
                    got[i], want);
      }
    }
    return true;
  }

  uint64_t wrong() const { return wrong_; }

  bool failed(const char* what, hc_status_t rc = HC_INTERNAL) {
    std::printf("ERROR %s: status=%d text=%s\n", what, rc, lastError(comm_));
    return false;
  }

 private:
  hc_comm_t comm_;
  const SmallOpsOptions& o_;
  uint64_t wrong_ = 0;
};

// A small int32 sum allreduce of count elements through hc_mem_alloc memory, waited (at most
// 20 s) and checked; *wrong counts wrong elements.
hc_status_t checkedAllreduce(hc_comm_t comm, const SmallOpsOptions& o, uint64_t seed,
                             uint64_t count, uint64_t* wrong) {
  HostBuffer send(count * sizeof(int32_t), true), recv(count * sizeof(int32_t), true);
  if (!send.ok() || !recv.ok()) return HC_NO_RESOURCE;
  for (uint64_t i = 0; i < count; ++i) {
    send.as<int32_t>()[i] = inputValue<int32_t>(seed, o.rank, i, Red::Sum, o.nranks);
  }
  hc_request_t req = nullptr;
  hc_status_t rc = hc_allreduce(send.as<int32_t>(), recv.as<int32_t>(), count, HC_INT32, HC_SUM,
                                comm, nullptr, &req);
  if (rc == HC_OK) rc = waitFor(&req, 20000);
  if (rc != HC_OK) return rc;
  for (uint64_t i = 0; i < count; ++i) {
    if (recv.as<int32_t>()[i] != expectedReduction<int32_t>(seed, i, Red::Sum, o.nranks)) {
      ++*wrong;
    }
  }
  return HC_OK;
}

// The warm-up every failure mode starts with: proves the area works before it is broken.
bool warmUp(hc_comm_t comm, const SmallOpsOptions& o) {
  uint64_t wrong = 0;
  hc_status_t rc = checkedAllreduce(comm, o, o.seed, 4, &wrong);
  printStatus("warmup", rc, comm);
  if (rc == HC_OK && wrong != 0) {
    std::printf("WRONG warmup: %llu elements\n", static_cast<unsigned long long>(wrong));
  }
  return rc == HC_OK && wrong == 0;
}

// Polls hc_comm_get_async_error every millisecond, as a framework's watchdog does, until it
// reports a failure of an operation issued without a request: that failure, or HC_TIMEOUT after
// `seconds` (with a line saying so).
hc_status_t awaitAsyncError(hc_comm_t comm, int seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  for (;;) {
    hc_status_t async = HC_OK;
    if (hc_status_t rc = hc_comm_get_async_error(comm, &async); rc != HC_OK) return rc;
    if (async != HC_OK) return async;
    if (Clock::now() >= deadline) {
      std::printf("no async error after %d s\n", seconds);
      return HC_TIMEOUT;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool fileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

int runSmallMixed(hc_comm_t comm, const SmallOpsOptions& o) {
  MixedRun run(comm, o);
  int ops = 0, daemonOps = 0;
  for (const Step& s : kSteps) {
    ops += opsOf(s);
    if (takesDaemon(s)) daemonOps += opsOf(s);
  }
  // Twice: each step waited before the next, then every step issued before any is waited for.
  std::printf("ops %d daemon-ops %d\n", 2 * ops, 2 * daemonOps);
  uint64_t seed = o.seed * 1000;
  for (const Step& s : kSteps) {
    watchdogNote("mixed step " + std::to_string(seed));
    std::vector<MixedOp> issued;
    if (!run.issue(s, ++seed, &issued)) return kExitOpFailed;
    for (MixedOp& m : issued) {
      if (!run.finish(m, ("waited step " + std::to_string(seed)).c_str())) return kExitOpFailed;
    }
  }
  std::vector<MixedOp> issued;
  issued.reserve(64);
  for (const Step& s : kSteps) {
    watchdogNote("mixed step " + std::to_string(seed));
    if (!run.issue(s, ++seed, &issued)) return kExitOpFailed;
  }
  for (MixedOp& m : issued) {
    watchdogNote("waiting for mixed op " + std::to_string(m.seed));
    if (!run.finish(m, ("async op " + std::to_string(m.seed)).c_str())) return kExitOpFailed;
  }
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(run.wrong()));
  return run.wrong() == 0 ? kExitOk : kExitWrong;
}

int runSmallMismatch(hc_comm_t comm, const SmallOpsOptions& o) {
  if (!warmUp(comm, o)) return kExitOpFailed;
  constexpr uint64_t kLarge = 100000;
  HostBuffer send(kLarge * sizeof(int32_t), true), recv(kLarge * sizeof(int32_t), true);
  if (!send.ok() || !recv.ok()) return kExitOpFailed;
  std::memset(send.as<void>(), 0, kLarge * sizeof(int32_t));
  // Rank 0 posts allreduce(2): small everywhere it is posted; the others 3 (small too) or
  // 100000 (the daemon's).
  const uint64_t count = o.rank == 0 ? 2 : o.variant == "large" ? kLarge : 3;
  hc_status_t rc = HC_OK;
  if (o.variant == "async") {
    rc = hc_allreduce(send.as<void>(), recv.as<void>(), count, HC_INT32, HC_SUM, comm, nullptr,
                      nullptr);
    if (rc == HC_OK) rc = awaitAsyncError(comm, 20);
  } else if (o.variant == "count" || o.variant == "large") {
    hc_request_t req = nullptr;
    rc = hc_allreduce(send.as<void>(), recv.as<void>(), count, HC_INT32, HC_SUM, comm, nullptr,
                      &req);
    if (rc == HC_OK) rc = waitFor(&req, 20000);
  } else {
    std::printf("unknown --variant %s\n", o.variant.c_str());
    return kExitUsage;
  }
  printStatus("result", rc, comm);
  uint64_t wrong = 0;
  printStatus("later", checkedAllreduce(comm, o, o.seed + 1, 2, &wrong), comm);
  return kExitOk;
}

int runSmallPeerLost(hc_comm_t comm, const SmallOpsOptions& o) {
  const bool async = o.variant == "killasync";
  const bool late = o.variant == "late";
  if (o.variant != "exit" && o.variant != "kill" && o.variant != "abort" && !async && !late) {
    std::printf("unknown --variant %s\n", o.variant.c_str());
    return kExitUsage;
  }
  if (!warmUp(comm, o)) return kExitOpFailed;
  if (o.rank == o.nranks - 1) {
    if (o.variant == "exit") {
      std::printf("leaving\n");
      std::fflush(stdout);
      ::_exit(0);  // no destroy, no abort: the daemon sees the connection close
    }
    if (o.variant == "kill" || async) {
      std::printf("idle\n");
      for (;;) ::pause();
    }
    if (late) {
      std::printf("idle\n");
      std::fflush(stdout);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!fileExists(o.goFile)) {
      if (Clock::now() >= deadline) {
        std::printf("ERROR no go file after 60 s\n");
        (void)hc_comm_abort(comm);
        return kExitOpFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (late) {
      // It joins after all: the others' small allreduce completes.
      HostBuffer send(64, true), recv(64, true);
      if (!send.ok() || !recv.ok()) return kExitOpFailed;
      std::memset(send.as<void>(), 0, 64);
      hc_request_t req = nullptr;
      hc_status_t rc =
          hc_allreduce(send.as<void>(), recv.as<void>(), 2, HC_INT32, HC_SUM, comm, nullptr, &req);
      if (rc == HC_OK) rc = waitFor(&req, 30000);
      printStatus("result", rc, comm);
      return kExitOk;
    }
    printStatus("aborted", hc_comm_abort(comm), nullptr);
    return kExitOk;
  }
  // A small allreduce the last rank never joins.
  HostBuffer send(64, true), recv(64, true);
  if (!send.ok() || !recv.ok()) return kExitOpFailed;
  std::memset(send.as<void>(), 0, 64);
  // killasync: without a request, its failure read from hc_comm_get_async_error.
  hc_request_t req = nullptr;
  hc_status_t rc = hc_allreduce(send.as<void>(), recv.as<void>(), 2, HC_INT32, HC_SUM, comm,
                                nullptr, async ? nullptr : &req);
  printStatus("posted", rc, comm);
  if (rc == HC_OK) rc = async ? awaitAsyncError(comm, 30) : waitFor(&req, 30000);
  printStatus("result", rc, comm);
  if (req != nullptr) return kExitHung;  // still pending: the communicator is aborted on return
  if (late) return kExitOk;              // the communicator is healthy: nothing more fails
  uint64_t wrong = 0;
  printStatus("later", checkedAllreduce(comm, o, o.seed + 1, 2, &wrong), comm);
  return kExitOk;
}

}  // namespace hc::integ
