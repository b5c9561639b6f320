// Grid mode, for communicators that span daemons: every data operation over fp32, bf16, int64 and
// fp8 e4m3, counts 0, 1, 7, 4097 and 1Mi+3, in place and out of place; every reduction operator
// at the small counts, sum at 1Mi+3. Matrix mode runs every dtype but only a subset of the 1Mi+3
// cases (runsBig in worker_cases.cc); this grid runs each operation and placement large for
// these four dtypes, so that the large-message paths among daemons (ring, pipelined chunks) see
// all of them.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

constexpr hc_dtype_t kGridDtypes[] = {HC_FLOAT32, HC_BFLOAT16, HC_INT64, HC_FLOAT8E4M3};
constexpr uint64_t kGridCounts[] = {0, 1, 7, 4097, kBigCount};
constexpr Coll kGridColls[] = {
    Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter,
    Coll::AllToAll,  Coll::AllToAllV, Coll::Gather, Coll::Scatter,   Coll::SendRecv};
// As in matrix mode: an operation and dtype that keep failing are skipped for the rest of the
// list, so that one missing feature does not hide the rest.
constexpr int kMaxErrorsPerOp = 3;

std::vector<Case> gridCases(int nranks, uint64_t seed) {
  std::vector<Case> cases;
  for (hc_dtype_t dtype : kGridDtypes) {
    for (Coll coll : kGridColls) {
      std::vector<Red> reds = {Red::Sum};
      if (isReduction(coll)) reds.assign(std::begin(kAllReds), std::end(kAllReds));
      for (Red red : reds) {
        for (uint64_t count : kGridCounts) {
          // 1Mi+3 costs about half a second per case with 4 ranks on 2 cores (mostly verifying
          // millions of elements), so the other operators run large only in matrix mode.
          if (count == kBigCount && red != Red::Sum) continue;
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlace(coll)) continue;
            Case c{coll, dtype, red, count, inPlace};
            c.seed = seed + cases.size();
            // Cycling the root through every rank covers roots on every daemon.
            c.root = static_cast<int>(cases.size() % static_cast<size_t>(nranks));
            cases.push_back(c);
          }
        }
      }
    }
  }
  return cases;
}

}  // namespace

int runGrid(hc_comm_t comm, const WorkerOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Case> cases = gridCases(o.nranks, o.seed);
  DeviceChoice device;
  if (!parseDeviceChoice(o.device, &device)) {
    std::printf("error bad --device %s\n", o.device.c_str());
    return kExitUsage;
  }
  CaseRunner runner(comm, o.rank, o.nranks, device);
  if (std::string error = runner.allocate(kBigCount); !error.empty()) {
    std::printf("error %s\n", error.c_str());
    return kExitOpFailed;
  }
  uint64_t done = 0, wrong = 0, errors = 0, skipped = 0;
  std::map<std::pair<Coll, hc_dtype_t>, int> errorsOf;
  for (const Case& c : cases) {
    int& opErrors = errorsOf[{c.coll, c.dtype}];
    if (opErrors >= kMaxErrorsPerOp) {
      ++skipped;
      continue;
    }
    watchdogNote(describe(c));
    CaseResult r = runner.run(c);
    ++done;
    if (r.status != HC_OK) {
      ++errors;
      ++opErrors;
      std::printf("ERROR %s: status=%d text=%s\n", describe(c).c_str(), r.status, r.error.c_str());
    } else if (r.wrong != 0) {
      wrong += r.wrong;
      std::printf("WRONG %s: %llu wrong, first %s\n", describe(c).c_str(),
                  static_cast<unsigned long long>(r.wrong), r.firstWrong.c_str());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("cases %llu errors %llu skipped %llu seconds %.2f\n",
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(errors),
              static_cast<unsigned long long>(skipped), seconds);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrong));
  if (errors != 0) return kExitOpFailed;
  return wrong == 0 ? kExitOk : kExitWrong;
}

}  // namespace hc::integ
