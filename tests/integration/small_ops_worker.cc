// hc_small_ops_worker: main, and the matrix, chain and smoke modes (see small_ops_worker.h; the
// mixed-path and failure modes are in small_ops_worker_modes.cc).
#include "tests/integration/small_ops_worker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/ipc/small_area.h"
#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"
#include "tests/integration/worker_values.h"
#include "tests/support/hex.h"

namespace hc::integ {

const char* lastError(hc_comm_t comm) {
  const char* text = hc_get_last_error(comm);
  if (text == nullptr || *text == '\0') text = hc_get_last_error(nullptr);
  return text != nullptr ? text : "(null)";
}

namespace {

using Clock = std::chrono::steady_clock;

// The largest contribution of one rank the area takes; one element more goes to the daemon.
constexpr uint64_t kSlotBytes = ipc::kAreaSlotBytes;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Every small collective over every dtype and reduction, at the edges of the slot, in both
// placements and both kinds of host memory, with a barrier after each (op, dtype) block. Roots
// rotate. *daemonCases counts the cases one element past the slot (per rank).
std::vector<Case> smallCases(int nranks, uint64_t seed, uint64_t* daemonCases) {
  constexpr Coll kColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                             Coll::ReduceScatter};
  constexpr Red kReds[] = {Red::Sum, Red::Prod, Red::Max, Red::Min, Red::Avg, Red::PreMul};
  constexpr Red kCopy[] = {Red::Sum};
  std::vector<Case> out;
  uint64_t k = 0;
  *daemonCases = 0;
  for (Coll coll : kColls) {
    for (hc_dtype_t dtype : kAllDtypes) {
      // Reduce-scatter's contribution is the whole send buffer: nranks blocks.
      const uint64_t perElem =
          dtypeSize(dtype) * (coll == Coll::ReduceScatter ? static_cast<uint64_t>(nranks) : 1);
      const uint64_t limit = kSlotBytes / perElem;
      const uint64_t counts[] = {0, 1, 7, limit, limit + 1};
      const bool reduction = isReduction(coll);
      for (Red red : reduction ? std::span<const Red>(kReds) : std::span<const Red>(kCopy)) {
        for (uint64_t count : counts) {
          for (bool inPlace : {false, true}) {
            for (Mem mem : {Mem::Shared, Mem::User}) {
              Case c;
              c.coll = coll;
              c.dtype = dtype;
              c.red = red;
              c.count = count;
              c.inPlace = inPlace;
              c.mem = mem;
              c.root = static_cast<int>(k % static_cast<uint64_t>(nranks));
              c.seed = seed * 1000003 + k;
              ++k;
              out.push_back(c);
              if (count > limit) ++*daemonCases;
            }
          }
        }
      }
      Case barrier;
      barrier.coll = Coll::Barrier;
      out.push_back(barrier);
    }
  }
  return out;
}

// ---- chain ----

constexpr uint64_t kTinyCount = 1;                // one uint64: 8 bytes, through the area
constexpr uint64_t kLargeCount = (1u << 20) / 8;  // 1 MiB, through the daemon

// Two pre-multiplied sums whose scalars differ between ranks and add up to an odd number, so
// that repeated reductions never wipe the low bits (2 ranks summing would, after 64 steps).
uint64_t chainScalar(int which, int rank, int nranks) {
  if (which == 0) return rank == 0 ? (nranks % 2 == 0 ? 2 : 1) : 1;
  return rank == 0 ? 1 : 2;
}

// The seeded contents of chain buffer b (0: the first send buffer, k + 1: op k's receive buffer)
// of a rank before anything ran.
uint64_t chainInit(uint64_t seed, int rank, uint64_t b, uint64_t i) {
  return mixBits(seed * 7919 + b, rank, i);
}

struct ChainOp {
  uint64_t count = 0;
  int which = 0;       // the pre-multiplied sum it uses
  bool shared = true;  // its receive buffer is hc_mem_alloc memory (else malloc)
};

std::vector<ChainOp> chainOps(uint64_t seed, uint64_t n, uint64_t* large) {
  std::mt19937_64 rng(seed);
  std::vector<ChainOp> ops(n);
  *large = 0;
  for (uint64_t k = 0; k < n; ++k) {
    ops[k].count = rng() % 8 == 0 ? kLargeCount : kTinyCount;
    ops[k].which = static_cast<int>(rng() % 2);
    ops[k].shared = rng() % 4 != 0;
    if (ops[k].count == kLargeCount) ++*large;
  }
  return ops;
}

}  // namespace

int runSmallMatrix(hc_comm_t comm, const SmallOpsOptions& o) {
  uint64_t daemonCases = 0;
  std::vector<Case> cases = smallCases(o.nranks, o.seed, &daemonCases);
  std::printf("daemon-cases %llu\n", static_cast<unsigned long long>(daemonCases));
  WorkerOptions wo;
  wo.rank = o.rank;
  wo.nranks = o.nranks;
  wo.seed = o.seed;
  return runCaseList(comm, wo, cases);
}

int runSmallChain(hc_comm_t comm, const SmallOpsOptions& o) {
  const auto start = Clock::now();
  const uint64_t n = o.iters != 0 ? o.iters : 200;
  uint64_t large = 0;
  const std::vector<ChainOp> ops = chainOps(o.seed, n, &large);
  std::printf("large %llu\n", static_cast<unsigned long long>(large));
  hc_redop_t redops[2];
  for (int which = 0; which < 2; ++which) {
    uint64_t scalar = chainScalar(which, o.rank, o.nranks);
    if (hc_status_t rc = hc_redop_create_premul_sum(&redops[which], &scalar, HC_UINT64,
                                                    HC_SCALAR_HOST_IMMEDIATE, comm);
        rc != HC_OK) {
      std::printf("ERROR hc_redop_create_premul_sum: %s\n", lastError(comm));
      return kExitOpFailed;
    }
  }
  // Buffer b holds what op b - 1 writes and op b reads: as many elements as the larger of the two.
  std::vector<HostBuffer> bufs(n + 1);
  std::vector<uint64_t> elems(n + 1);
  for (uint64_t b = 0; b <= n; ++b) {
    const uint64_t written = b == 0 ? 0 : ops[b - 1].count;
    const uint64_t read = b == n ? 0 : ops[b].count;
    elems[b] = std::max(written, read);
    if (!bufs[b].allocate(elems[b] * sizeof(uint64_t), b == 0 || ops[b - 1].shared)) {
      std::printf("ERROR allocating chain buffer %llu: %s\n", static_cast<unsigned long long>(b),
                  lastError(nullptr));
      return kExitOpFailed;
    }
    uint64_t* p = bufs[b].as<uint64_t>();
    for (uint64_t i = 0; i < elems[b]; ++i) p[i] = chainInit(o.seed, o.rank, b, i);
  }
  // Everything issued before anything is waited for.
  std::vector<hc_request_t> reqs(n, nullptr);
  for (uint64_t k = 0; k < n; ++k) {
    watchdogNote("chain op " + std::to_string(k));
    hc_status_t rc = hc_allreduce(bufs[k].as<uint64_t>(), bufs[k + 1].as<uint64_t>(), ops[k].count,
                                  HC_UINT64, redops[ops[k].which], comm, nullptr, &reqs[k]);
    if (rc != HC_OK) {
      std::printf("ERROR chain op %llu: status=%d text=%s\n", static_cast<unsigned long long>(k),
                  rc, lastError(comm));
      return kExitOpFailed;
    }
  }
  int failed = 0;
  for (uint64_t k = 0; k < n; ++k) {
    watchdogNote("waiting for chain op " + std::to_string(k));
    if (hc_status_t rc = hc_wait(&reqs[k]); rc != HC_OK) {
      std::printf("ERROR chain op %llu: status=%d text=%s\n", static_cast<unsigned long long>(k),
                  rc, lastError(comm));
      ++failed;
    }
  }
  for (hc_redop_t op : redops) (void)hc_redop_destroy(op, comm);
  if (failed != 0) return kExitOpFailed;

  // Every rank's send buffer of op k, computed: what op k - 1 wrote, then that buffer's seeds.
  std::vector<std::vector<uint64_t>> in(static_cast<size_t>(o.nranks));
  for (int q = 0; q < o.nranks; ++q) {
    in[q].resize(kLargeCount);
    for (uint64_t i = 0; i < ops[0].count; ++i) in[q][i] = chainInit(o.seed, q, 0, i);
  }
  std::vector<uint64_t> result(kLargeCount);
  uint64_t wrong = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t count = ops[k].count;
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t v = 0;
      for (int q = 0; q < o.nranks; ++q) v += chainScalar(ops[k].which, q, o.nranks) * in[q][i];
      result[i] = v;
    }
    const uint64_t* got = bufs[k + 1].as<uint64_t>();
    for (uint64_t i = 0; i < elems[k + 1]; ++i) {
      const uint64_t want = i < count ? result[i] : chainInit(o.seed, o.rank, k + 1, i);
      if (got[i] == want) continue;
      if (wrong++ < 5) {
        std::printf("WRONG chain op %llu (count %llu) [%llu]: got %llu, want %llu\n",
                    static_cast<unsigned long long>(k), static_cast<unsigned long long>(count),
                    static_cast<unsigned long long>(i), static_cast<unsigned long long>(got[i]),
                    static_cast<unsigned long long>(want));
      }
    }
    if (k + 1 == n) break;
    for (int q = 0; q < o.nranks; ++q) {
      for (uint64_t i = 0; i < ops[k + 1].count; ++i) {
        in[q][i] = i < count ? result[i] : chainInit(o.seed, q, k + 1, i);
      }
    }
  }
  std::printf("chain ops %llu seconds %.2f\n", static_cast<unsigned long long>(n),
              secondsSince(start));
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  return wrong == 0 ? kExitOk : kExitWrong;
}

int runSmallSmoke(hc_comm_t comm, const SmallOpsOptions& o) {
  const uint64_t n = o.iters != 0 ? o.iters : 1000;
  HostBuffer send(sizeof(int64_t), true), recv(sizeof(int64_t), true);
  if (!send.ok() || !recv.ok()) {
    std::printf("ERROR hc_mem_alloc: %s\n", lastError(nullptr));
    return kExitOpFailed;
  }
  uint64_t wrong = 0;
  // A NULL buffer of a small op is refused with the daemon path's words, on every rank alike (so
  // no rank waits for it), and the process lives on.
  hc_status_t bad =
      hc_allreduce(nullptr, recv.as<int64_t>(), 1, HC_INT64, HC_SUM, comm, nullptr, nullptr);
  if (bad != HC_INVALID_ARGUMENT) {
    std::printf("ERROR NULL send buffer: status=%d text=%s\n", bad, lastError(comm));
    return kExitOpFailed;
  }
  const auto start = Clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    if (i % 100 == 0) watchdogNote("smoke allreduce " + std::to_string(i));
    *send.as<int64_t>() = inputValue<int64_t>(o.seed + i, o.rank, 0, Red::Sum, o.nranks);
    *recv.as<int64_t>() = -1;
    hc_request_t req = nullptr;
    hc_status_t rc = hc_allreduce(send.as<int64_t>(), recv.as<int64_t>(), 1, HC_INT64, HC_SUM, comm,
                                  nullptr, &req);
    if (rc == HC_OK) rc = hc_wait(&req);
    if (rc != HC_OK) {
      std::printf("ERROR smoke allreduce %llu: status=%d text=%s\n",
                  static_cast<unsigned long long>(i), rc, lastError(comm));
      return kExitOpFailed;
    }
    const int64_t want = expectedReduction<int64_t>(o.seed + i, 0, Red::Sum, o.nranks);
    if (*recv.as<int64_t>() != want && wrong++ < 5) {
      std::printf("WRONG smoke allreduce %llu: got %lld, want %lld\n",
                  static_cast<unsigned long long>(i), static_cast<long long>(*recv.as<int64_t>()),
                  static_cast<long long>(want));
    }
  }
  const double seconds = secondsSince(start);
  std::printf("smoke ops=%llu us_per_op=%.1f\n", static_cast<unsigned long long>(n),
              1e6 * seconds / static_cast<double>(n));
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  return wrong == 0 ? kExitOk : kExitWrong;
}

}  // namespace hc::integ

namespace {

using hc::integ::SmallOpsOptions;

bool parseArgs(int argc, char** argv, SmallOpsOptions* o, hc_unique_id_t* id, int* watchdog) {
  bool haveId = false;
  auto u64 = [](const char* v) { return std::strtoull(v, nullptr, 10); };
  const std::map<std::string_view, std::function<void(const char*)>> setters = {
      {"--rank", [&](const char* v) { o->rank = std::atoi(v); }},
      {"--nranks", [&](const char* v) { o->nranks = std::atoi(v); }},
      {"--id", [&](const char* v) { haveId = hc::test::parseHexId(v, id); }},
      {"--mode", [&](const char* v) { o->mode = v; }},
      {"--small-ops", [&](const char* v) { o->smallOps = std::atoi(v) != 0; }},
      {"--seed", [&](const char* v) { o->seed = u64(v); }},
      {"--iters", [&](const char* v) { o->iters = u64(v); }},
      {"--variant", [&](const char* v) { o->variant = v; }},
      {"--go-file", [&](const char* v) { o->goFile = v; }},
      {"--watchdog", [&](const char* v) { *watchdog = std::atoi(v); }},
  };
  if (argc % 2 != 1) return false;
  for (int i = 1; i + 1 < argc; i += 2) {
    auto it = setters.find(argv[i]);
    if (it == setters.end()) return false;
    it->second(argv[i + 1]);
  }
  return haveId && o->nranks > 0 && o->rank >= 0 && o->rank < o->nranks;
}

}  // namespace

int main(int argc, char** argv) {
  namespace integ = hc::integ;
  // The test reads stdout from a file while the worker runs, and may SIGKILL it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::map<std::string_view, int (*)(hc_comm_t, const SmallOpsOptions&)> modes = {
      {"matrix", integ::runSmallMatrix},     {"chain", integ::runSmallChain},
      {"smoke", integ::runSmallSmoke},       {"mixed", integ::runSmallMixed},
      {"mismatch", integ::runSmallMismatch}, {"peerlost", integ::runSmallPeerLost}};
  SmallOpsOptions o;
  hc_unique_id_t id;
  std::memset(&id, 0, sizeof(id));
  int watchdog = 60;
  // Checked before init: a rank that gives up after joining would leave its peers waiting.
  if (!parseArgs(argc, argv, &o, &id, &watchdog) || modes.count(o.mode) == 0) {
    std::fprintf(stderr,
                 "usage: hc_small_ops_worker --rank R --nranks N --id HEX --mode MODE ...\n");
    return integ::kExitUsage;
  }
  // The failure modes bound their own waits; a rank waiting to be killed must not time out.
  if (watchdog > 0 && o.mode != "peerlost") integ::startWatchdog(watchdog);
  hc_config_t config = HC_CONFIG_INITIALIZER;
  config.host_small_ops = o.smallOps ? 1 : 0;
  hc_comm_t comm = nullptr;
  hc_status_t rc = hc_comm_init_rank_config(&comm, o.nranks, id, o.rank, &config);
  if (rc != HC_OK) {
    integ::printStatus("init", rc, nullptr);
    return integ::kExitOpFailed;
  }
  std::printf("ready\n");
  int code = modes.at(o.mode)(comm, o);
  if (integ::endsOwnComm(o)) return code;
  // A healthy communicator is destroyed (which the daemon must accept); one broken on purpose or
  // by a failure is aborted, which never waits for other ranks.
  const bool brokenOnPurpose = o.mode == "mismatch" || o.mode == "peerlost";
  if (code == integ::kExitOk && !brokenOnPurpose) {
    rc = hc_comm_destroy(comm);
    if (rc != HC_OK) {
      integ::printStatus("destroy", rc, nullptr);
      code = integ::kExitOpFailed;
    }
  } else {
    (void)hc_comm_abort(comm);
  }
  return code;
}
