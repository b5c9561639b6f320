// Matrix, alltoallv and demo modes: run a case list on one communicator and report every wrong
// case.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

// An operation and dtype that fail a few times are skipped for the rest of the list (every rank
// skips them alike: the errors come from the same calls everywhere), so that one missing feature
// does not hide the results of the others. A broken communicator fails every call at once, so
// going on costs little; a hang is the watchdog's business.
constexpr int kMaxErrorsPerOp = 3;

struct Tally {
  uint64_t cases = 0;
  uint64_t wrong = 0;
  uint64_t errors = 0;
  uint64_t skipped = 0;
};

int finish(const Tally& t, double seconds) {
  std::printf("cases %llu errors %llu skipped %llu seconds %.2f\n",
              static_cast<unsigned long long>(t.cases), static_cast<unsigned long long>(t.errors),
              static_cast<unsigned long long>(t.skipped), seconds);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(t.wrong));
  if (t.errors != 0) return kExitOpFailed;
  return t.wrong == 0 ? kExitOk : kExitWrong;
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int runCaseList(hc_comm_t comm, const WorkerOptions& o, const std::vector<Case>& cases) {
  auto start = std::chrono::steady_clock::now();
  uint64_t maxCount = 0;
  for (const Case& c : cases) maxCount = c.count > maxCount ? c.count : maxCount;
  DeviceChoice device;
  if (!parseDeviceChoice(o.device, &device)) {
    std::printf("error bad --device %s\n", o.device.c_str());
    return kExitUsage;
  }
  CaseRunner runner(comm, o.rank, o.nranks, device);
  if (std::string error = runner.allocate(maxCount); !error.empty()) {
    std::printf("error %s\n", error.c_str());
    return kExitOpFailed;
  }
  Tally tally;
  std::map<std::pair<Coll, hc_dtype_t>, int> errorsOf;
  for (const Case& c : cases) {
    int& errors = errorsOf[{c.coll, c.dtype}];
    if (errors >= kMaxErrorsPerOp) {
      ++tally.skipped;
      continue;
    }
    watchdogNote(describe(c));
    CaseResult r = runner.run(c);
    ++tally.cases;
    if (r.status != HC_OK) {
      ++tally.errors;
      std::printf("ERROR %s: status=%d text=%s\n", describe(c).c_str(), r.status, r.error.c_str());
      if (++errors == kMaxErrorsPerOp) {
        std::printf("skipping the remaining %s %s cases after %d errors\n",
                    std::string(collName(c.coll)).c_str(), std::string(dtypeName(c.dtype)).c_str(),
                    kMaxErrorsPerOp);
      }
      continue;
    }
    if (r.wrong != 0) {
      tally.wrong += r.wrong;
      std::printf("WRONG %s: %llu wrong, first %s\n", describe(c).c_str(),
                  static_cast<unsigned long long>(r.wrong), r.firstWrong.c_str());
    }
  }
  return finish(tally, since(start));
}

int runMatrix(hc_comm_t comm, const WorkerOptions& o) {
  return runCaseList(comm, o, matrixCases(o.nranks, o.seed));
}

int runAllToAllV(hc_comm_t comm, const WorkerOptions& o) {
  return runCaseList(comm, o, alltoallvCases(o.seed));
}

int runDemo(hc_comm_t comm, const WorkerOptions& o) {
  auto start = std::chrono::steady_clock::now();
  CaseRunner runner(comm, o.rank, o.nranks);
  if (std::string error = runner.allocate(kBigCount); !error.empty()) {
    std::printf("error %s\n", error.c_str());
    return kExitOpFailed;
  }
  std::printf("%-15s %-8s %-5s %9s %5s  %s\n", "op", "dtype", "redop", "count", "ranks", "result");
  Tally tally;
  for (const Case& c : demoCases(o.nranks, o.seed)) {
    CaseResult r = runner.run(c);
    ++tally.cases;
    std::string outcome = "OK";
    if (r.status != HC_OK) {
      ++tally.errors;
      outcome = "ERROR " + std::string(hc_get_error_string(r.status)) + ": " + r.error;
    } else if (r.wrong != 0) {
      tally.wrong += r.wrong;
      outcome = std::to_string(r.wrong) + " wrong (first " + r.firstWrong + ")";
    }
    bool reduction = isReduction(c.coll);
    std::printf("%-15s %-8s %-5s %9llu %5d  %s\n", std::string(collName(c.coll)).c_str(),
                c.coll == Coll::Barrier ? "-" : std::string(dtypeName(c.dtype)).c_str(),
                reduction ? std::string(redName(c.red)).c_str() : "-",
                static_cast<unsigned long long>(c.count), o.nranks, outcome.c_str());
  }
  return finish(tally, since(start));
}

}  // namespace hc::integ
