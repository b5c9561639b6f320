// Shrink and revoke modes: the survivors of a lost rank carry on in a smaller communicator, and
// a revoked communicator stops, then shrinks.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/worker_modes.h"
#include "tests/integration/worker_values.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;

// A send and a receive buffer of `count` int32 from hc_mem_alloc, freed on scope exit.
struct Int32Pair {
  explicit Int32Pair(uint64_t count) : count(count) {
    const size_t bytes = count * sizeof(int32_t) + 64;
    if (hc_mem_alloc(&send, bytes) != HC_OK || hc_mem_alloc(&recv, bytes) != HC_OK) ok = false;
  }
  ~Int32Pair() {
    (void)hc_mem_free(send);
    (void)hc_mem_free(recv);
  }
  Int32Pair(const Int32Pair&) = delete;
  Int32Pair& operator=(const Int32Pair&) = delete;

  uint64_t count;
  void* send = nullptr;
  void* recv = nullptr;
  bool ok = true;
};

// One int32 sum allreduce as `rank` of `nranks`, its result checked against the values every
// rank contributed (worker_values.h). *wrong counts the elements that differ.
hc_status_t sumAndCheck(hc_comm_t comm, int rank, int nranks, uint64_t seed, const Int32Pair& b,
                        uint64_t* wrong) {
  auto* s = static_cast<int32_t*>(b.send);
  auto* r = static_cast<int32_t*>(b.recv);
  for (uint64_t j = 0; j < b.count; ++j)
    s[j] = inputValue<int32_t>(seed, rank, j, Red::Sum, nranks);
  for (uint64_t j = 0; j < b.count; ++j) r[j] = -1;
  hc_request_t req = nullptr;
  hc_status_t rc = hc_allreduce(s, r, b.count, HC_INT32, HC_SUM, comm, nullptr, &req);
  if (rc == HC_OK) rc = hc_wait(&req);
  if (rc != HC_OK) return rc;
  *wrong = 0;
  for (uint64_t j = 0; j < b.count; ++j) {
    if (r[j] != expectedReduction<int32_t>(seed, j, Red::Sum, nranks)) ++*wrong;
  }
  return HC_OK;
}

std::vector<int> rankList(const std::string& text) {
  std::vector<int> ranks;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) ranks.push_back(std::atoi(item.c_str()));
  }
  return ranks;
}

// Shrinks comm by --exclude with `flags`, prints "shrink status=<s> rank=<r> size=<n> text=<t>",
// then runs --iters (default 100) verified allreduces on the child and prints "#wrong <n>".
int shrinkAndContinue(hc_comm_t comm, const WorkerOptions& o, int flags) {
  const std::vector<int> exclude = rankList(o.exclude);
  hc_comm_t child = nullptr;
  hc_status_t rc = hc_comm_shrink(comm, exclude.data(), static_cast<int>(exclude.size()), &child,
                                  nullptr, flags);
  int rank = -1, size = -1;
  if (rc == HC_OK) {
    (void)hc_comm_user_rank(child, &rank);
    (void)hc_comm_count(child, &size);
  }
  std::printf("shrink status=%d rank=%d size=%d text=%s\n", rc, rank, size,
              rc == HC_OK ? "" : hc_get_last_error(comm));
  if (rc != HC_OK) return kExitOpFailed;
  int below = 0;
  for (int r : exclude) below += r < o.rank ? 1 : 0;
  if (rank != o.rank - below || size != o.nranks - static_cast<int>(exclude.size())) {
    std::printf("WRONG place in the child: rank %d of %d\n", rank, size);
    (void)hc_comm_abort(child);
    return kExitWrong;
  }
  Int32Pair b(o.count);
  if (!b.ok) return kExitOpFailed;
  const uint64_t iters = o.iters != 0 ? o.iters : 100;
  uint64_t wrong = 0;
  for (uint64_t i = 1; i <= iters; ++i) {
    uint64_t w = 0;
    rc = sumAndCheck(child, rank, size, o.seed * 7919 + i, b, &w);
    if (rc != HC_OK) {
      printStatus("after", rc, child);
      (void)hc_comm_abort(child);
      return kExitOpFailed;
    }
    wrong += w;
  }
  std::printf("child iters %llu\n#wrong %llu\n", static_cast<unsigned long long>(iters),
              static_cast<unsigned long long>(wrong));
  rc = hc_comm_destroy(child);
  if (rc != HC_OK) printStatus("destroy", rc, nullptr);
  return wrong != 0 ? kExitWrong : rc == HC_OK ? kExitOk : kExitOpFailed;
}

int shrinkFlags(const WorkerOptions& o) {
  return o.phase == "abort" ? HC_SHRINK_ABORT : HC_SHRINK_DEFAULT;
}

}  // namespace

int runShrink(hc_comm_t comm, const WorkerOptions& o) {
  Int32Pair b(o.count);
  if (!b.ok) return kExitOpFailed;
  const auto start = Clock::now();
  for (uint64_t iter = 1;; ++iter) {
    uint64_t wrong = 0;
    hc_status_t rc = sumAndCheck(comm, o.rank, o.nranks, o.seed + iter, b, &wrong);
    if (rc != HC_OK) {
      printStatus("result", rc, comm);
      break;
    }
    if (wrong != 0) {
      std::printf("WRONG iteration %llu before the fault: %llu wrong\n",
                  static_cast<unsigned long long>(iter), static_cast<unsigned long long>(wrong));
      return kExitWrong;
    }
    if (iter == 1) std::printf("progress 1\n");
    if (Clock::now() - start > std::chrono::seconds(60)) {
      std::printf("HUNG: no fault came within 60 s\n");
      return kExitHung;
    }
  }
  return shrinkAndContinue(comm, o, shrinkFlags(o));
}

int runRevoke(hc_comm_t comm, const WorkerOptions& o) {
  Int32Pair b(o.count);
  if (!b.ok) return kExitOpFailed;
  uint64_t wrong = 0;
  hc_status_t rc = sumAndCheck(comm, o.rank, o.nranks, o.seed, b, &wrong);
  if (rc != HC_OK || wrong != 0) {
    printStatus("warmup", rc, comm);
    return kExitOpFailed;
  }
  std::printf("progress 1\n");
  if (o.rank == o.nranks - 1) {
    // The others are inside an allreduce this rank never posts: the revoke must end it for them.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    printStatus("revoke", hc_comm_revoke(comm, 0), comm);
    printStatus("finalize", hc_comm_finalize(comm), comm);
  } else {
    rc = sumAndCheck(comm, o.rank, o.nranks, o.seed + 1, b, &wrong);
    printStatus("result", rc, comm);
    // NCCL's way: a rank whose operation failed because of a revoke revokes too.
    printStatus("revoke", hc_comm_revoke(comm, 0), comm);
  }
  // A revoked communicator may still be split: by parity, then a verified allreduce on each half.
  hc_comm_t half = nullptr;
  rc = hc_comm_split(comm, o.rank % 2, o.rank, &half, nullptr);
  printStatus("split", rc, comm);
  if (rc != HC_OK) return kExitOpFailed;
  const int halfSize = (o.nranks - o.rank % 2 + 1) / 2;
  rc = sumAndCheck(half, o.rank / 2, halfSize, o.seed + 2, b, &wrong);
  std::printf("half status=%d wrong=%llu\n", rc, static_cast<unsigned long long>(wrong));
  (void)hc_comm_destroy(half);
  if (rc != HC_OK || wrong != 0) return kExitOpFailed;
  return shrinkAndContinue(comm, o, shrinkFlags(o));
}

int runShrinkBusy(hc_comm_t comm, const WorkerOptions& o) {
  Int32Pair b(o.count);
  if (!b.ok) return kExitOpFailed;
  hc_request_t pending = nullptr;
  if (o.rank == 0) {
    // An allreduce no other rank posts: the parent is busy on this daemon.
    auto* s = static_cast<int32_t*>(b.send);
    for (uint64_t j = 0; j < b.count; ++j) s[j] = 1;
    if (hc_allreduce(s, b.recv, b.count, HC_INT32, HC_SUM, comm, nullptr, &pending) != HC_OK) {
      printStatus("post", HC_INTERNAL, comm);
      return kExitOpFailed;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  hc_comm_t child = nullptr;
  const hc_status_t rc = hc_comm_shrink(comm, nullptr, 0, &child, nullptr, HC_SHRINK_DEFAULT);
  printStatus("default", rc, comm);
  if (rc == HC_OK) {
    (void)hc_comm_destroy(child);
    return kExitWrong;
  }
  // With NCCL_SHRINK_ABORT the same call stops rank 0's allreduce and forms the child.
  const int code = shrinkAndContinue(comm, o, HC_SHRINK_ABORT);
  if (pending != nullptr) printStatus("pending", hc_wait(&pending), comm);
  return code;
}

int runShrinkMismatch(hc_comm_t comm, const WorkerOptions& o) {
  const std::vector<int> exclude = rankList(o.exclude);
  hc_comm_t child = nullptr;
  const hc_status_t rc = hc_comm_shrink(comm, exclude.data(), static_cast<int>(exclude.size()),
                                        &child, nullptr, shrinkFlags(o));
  std::printf("shrink status=%d text=%s\n", rc, rc == HC_OK ? "" : hc_get_last_error(comm));
  if (rc == HC_OK) (void)hc_comm_destroy(child);
  return rc != HC_OK ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
