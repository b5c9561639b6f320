// hc_small_ops_worker: one rank of the small-operation area tests (small_ops_test.cc), as its own
// process linking only libhcclient. Its communicator is made with hc_config_t host_small_ops (or
// without it: --small-ops 0), and each mode runs small collectives on it, checked against
// results computed here from seeds (worker_values.h).
//
//   hc_small_ops_worker --rank R --nranks N --id <256 hex digits> --mode MODE
//                       [--small-ops 0|1] [--seed S] [--iters K] [--variant V] [--go-file PATH]
//                       [--watchdog SECONDS]
//
// Modes, and the lines they print beside "ready" (initialized), "WRONG ..." and "ERROR ...":
//   matrix    every op x dtype x redop at counts 0, 1, 7, the largest that fits the area's slot
//             and one more, in place and out of place, hc_mem_alloc and heap memory, with
//             barriers between ("daemon-cases <n>": the cases per rank that exceed the slot and
//             so go to the daemon; "#wrong <n>")
//   chain     --iters (200) seeded 8-byte and 1 MiB allreduces, each reading the previous one's
//             result, issued with requests and waited at the end ("large <n>": the 1 MiB ones;
//             "#wrong <n>")
//   smoke     a small allreduce with a NULL send buffer refused, then --iters (1000) 8-byte
//             allreduces, each waited and checked ("smoke ops=<n>
//             us_per_op=<t>"; "#wrong <n>")
//   mixed     small allreduces, broadcasts and allgathers of which one rank takes some to the
//             daemon (sim device memory, a group), waited one by one and then all at once
//             ("ops <n> daemon-ops <d>": collectives per rank, and those that go to the daemon
//             when every rank asked for the area; "#wrong <n>")
//   mismatch  --variant count|large|async: a verified warm-up ("warmup status="), then an
//             allreduce of count 2 on rank 0 and 3 (count, async) or 100000 (large) elsewhere,
//             waited through its request or, for async, issued without one and read from
//             hc_comm_get_async_error ("result status=<n> text=<t>"), then one more small
//             allreduce ("later status=")
//   peerlost  --variant exit|kill|killasync|abort|late: a verified warm-up ("warmup status=");
//             the last rank then exits without a word (exit), prints "idle" and waits to be
//             killed (kill, killasync), or waits for --go-file and calls hc_comm_abort
//             ("aborted status="), or prints "idle", waits for --go-file and joins after all
//             (late: "result status="); the others post a small allreduce it never joins (but
//             late) ("posted status=") and print its end ("result status=": through its
//             request, or for killasync, issued without one, from hc_comm_get_async_error) and,
//             but late, that of one more ("later status=")
// Exit codes as hc_rank_worker's (worker_modes.h): 0 ok, 1 wrong, 2 usage, 3 failed call, 4 hung.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "hetero_comm/hc.h"

namespace hc::integ {

struct SmallOpsOptions {
  int rank = -1;
  int nranks = 0;
  std::string mode;
  bool smallOps = true;  // hc_config_t host_small_ops
  uint64_t seed = 1;
  uint64_t iters = 0;  // 0: the mode's default
  std::string variant;
  std::string goFile;
};

int runSmallMatrix(hc_comm_t comm, const SmallOpsOptions& o);
int runSmallChain(hc_comm_t comm, const SmallOpsOptions& o);
int runSmallSmoke(hc_comm_t comm, const SmallOpsOptions& o);
// small_ops_worker_modes.cc
int runSmallMixed(hc_comm_t comm, const SmallOpsOptions& o);
int runSmallMismatch(hc_comm_t comm, const SmallOpsOptions& o);
// Ends the communicator on the rank that aborts it (endsOwnComm): the caller must not touch it
// there.
int runSmallPeerLost(hc_comm_t comm, const SmallOpsOptions& o);
inline bool endsOwnComm(const SmallOpsOptions& o) {
  return o.mode == "peerlost" && o.variant == "abort" && o.rank == o.nranks - 1;
}

// Host memory for an operation: from hc_mem_alloc (the daemon maps it) or plain malloc.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(size_t bytes, bool shared) { allocate(bytes, shared); }
  ~HostBuffer() { reset(); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      p_ = other.p_;
      shared_ = other.shared_;
      other.p_ = nullptr;
    }
    return *this;
  }

  bool allocate(size_t bytes, bool shared) {
    reset();
    shared_ = shared;
    if (shared) {
      if (hc_mem_alloc(&p_, bytes) != HC_OK) p_ = nullptr;
    } else {
      p_ = std::malloc(bytes);
    }
    return p_ != nullptr;
  }
  void reset() {
    if (p_ == nullptr) return;
    if (shared_) {
      (void)hc_mem_free(p_);
    } else {
      std::free(p_);
    }
    p_ = nullptr;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  bool ok() const { return p_ != nullptr; }

 private:
  void* p_ = nullptr;
  bool shared_ = false;
};

// The error text of a failed call or wait on comm ("(null)" when there is none).
const char* lastError(hc_comm_t comm);

}  // namespace hc::integ
