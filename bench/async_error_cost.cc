// hc-async-error-cost: what one ncclCommGetAsyncError costs, the call a framework's watchdog
// makes in a loop (PyTorch's polls each communicator every few milliseconds, and a non-blocking
// init spins on it). NCCL answers it from the communicator's own memory; so must the shim: no
// system call beyond a throttled hang-up check, no lock held across anything slow, no message to
// the daemon. Measured on a one-rank communicator of a running hetero-commd, in the same run as
// two baselines of this machine: an uncontended std::mutex lock and unlock (the cheapest thing a
// call that touches shared state does) and std::chrono::steady_clock::now() (the clock read the
// hang-up check makes). Each of --reps rounds times --calls calls of each, in a rotating order;
// the table gives per-call medians over the rounds and the ratios to the mutex pair.
// Exit: 0 when everything ran (bound met or not, the verdict is printed), 1 on a failure.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hetero_comm/hc.h"

namespace {

// Issue 18's word for "cheap": a watchdog polling every communicator each millisecond spends
// under a thousandth of a core on it while a call stays below this.
constexpr double kBoundNs = 1000.0;

using Clock = std::chrono::steady_clock;

template <class F>
double nsPerCall(long calls, F&& f) {
  const auto start = Clock::now();
  for (long i = 0; i < calls; ++i) f();
  const auto took = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  return took / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hc-async-error-cost: the cost of ncclCommGetAsyncError beside baselines"};
  std::string socket;
  long calls = 1'000'000;
  int reps = 7;
  app.add_option("-s,--socket", socket, "hetero-commd's socket (else HC_SOCKET or the default)");
  app.add_option("--calls", calls, "calls per measurement")
      ->check(CLI::Range(1000L, 1'000'000'000L));
  app.add_option("--reps", reps, "rounds; the table gives medians")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (!socket.empty()) ::setenv("HC_SOCKET", socket.c_str(), 1);

  ncclUniqueId ncclId;
  ncclComm_t nccl = nullptr;
  if (ncclGetUniqueId(&ncclId) != ncclSuccess ||
      ncclCommInitRank(&nccl, 1, ncclId, 0) != ncclSuccess) {
    std::fprintf(stderr, "hc-async-error-cost: NCCL communicator: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  hc_unique_id_t hcId;
  hc_comm_t hc = nullptr;
  if (hc_get_unique_id(&hcId) != HC_OK || hc_comm_init_rank(&hc, 1, hcId, 0) != HC_OK) {
    std::fprintf(stderr, "hc-async-error-cost: hc communicator: %s\n", hc_get_last_error(nullptr));
    return 1;
  }

  long wrong = 0;  // any answer but "no error" is a failure of the run, not a cost
  std::mutex mutex;
  volatile Clock::rep sink = 0;  // each clock read is stored, so none can be left out
  struct Row {
    const char* name;
    std::function<void()> call;
    std::vector<double> ns;
  };
  std::vector<Row> rows = {
      {"ncclCommGetAsyncError",
       [&] {
         ncclResult_t async = ncclSuccess;
         if (ncclCommGetAsyncError(nccl, &async) != ncclSuccess || async != ncclSuccess) ++wrong;
       },
       {}},
      {"hc_comm_get_async_error",
       [&] {
         hc_status_t async = HC_OK;
         if (hc_comm_get_async_error(hc, &async) != HC_OK || async != HC_OK) ++wrong;
       },
       {}},
      {"mutex lock+unlock",
       [&] {
         mutex.lock();
         mutex.unlock();
       },
       {}},
      {"steady_clock::now", [&] { sink = Clock::now().time_since_epoch().count(); }, {}},
  };
  for (Row& row : rows) (void)nsPerCall(calls / 10, row.call);  // warm-up
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t k = 0; k < rows.size(); ++k) {
      Row& row = rows[(static_cast<size_t>(rep) + k) % rows.size()];
      row.ns.push_back(nsPerCall(calls, row.call));
    }
  }
  if (wrong != 0) {
    std::fprintf(stderr, "hc-async-error-cost: %ld calls reported an error: %s\n", wrong,
                 ncclGetLastError(nccl));
    return 1;
  }

  const double mutexNs = median(rows[2].ns);
  std::printf("# ns per call, median of %d rounds of %ld calls (one-rank communicators)\n", reps,
              calls);
  std::printf("# %-26s %10s %10s %12s\n", "call", "ns", "min..max", "x mutex pair");
  for (const Row& row : rows) {
    const auto [lo, hi] = std::minmax_element(row.ns.begin(), row.ns.end());
    std::printf("  %-26s %10.1f %4.0f..%-5.0f %12.2f\n", row.name, median(row.ns), *lo, *hi,
                median(row.ns) / mutexNs);
  }
  const double cost = median(rows[0].ns);
  std::printf("hc-async-error-cost: ncclCommGetAsyncError %.1f ns, bound %.0f ns: %s\n", cost,
              kBoundNs, cost <= kBoundNs ? "PASS" : "MISS");
  (void)ncclCommFinalize(nccl);
  (void)ncclCommDestroy(nccl);
  (void)hc_comm_finalize(hc);
  (void)hc_comm_destroy(hc);
  return 0;
}
