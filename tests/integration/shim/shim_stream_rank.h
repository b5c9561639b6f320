// hc_shim_stream_rank (libnccl.so.2 over the fake CUDA driver) and hc_shim_stream_rank_rccl
// (librccl.so.1 over the fake HIP runtime): one rank of a job that checks NCCL's stream semantics
// through the shim, with real daemons and no GPU. What the checks share; shim_stream_rank.cc has
// main, shim_stream_checks.cc the ordering checks (a) to (g), shim_stream_abort.cc the abort (h).
//
// Output: "ok <check>: ..." for each check passed, "WRONG <check>: ..." or "ERROR ..." for each
// failure, then "#wrong <n>"; the exit code is 0 only when n is 0.
#pragma once

#if defined(HC_SHIM_STREAM_RCCL)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/integration/shim/shim_stream_gpu.h"

namespace hc::shim_stream {

// Which communicator this rank leaves waiting on an operation that no other rank posts, and
// aborts from a second thread (check h): the job's, the one split from it, or neither.
enum class AbortRole { None, Main, Split };

// Elements per operation: not a multiple of anything the daemon chunks by.
inline constexpr size_t kCount = 4097;

struct Rank {
  int rank = 0;
  int nranks = 0;
  ncclComm_t comm = nullptr;
  FakeGpu* gpu = nullptr;  // borrowed: main owns it
  void* stream = nullptr;  // made with the runtime's stream call
  std::string syncDir;     // where the job's ranks leave step files
  AbortRole abortRole = AbortRole::None;
  int wrong = 0;
};

// ---- output (shim_stream_rank.cc); each line is flushed at once ----
void pass(const char* check, const std::string& detail);
void wrong(Rank& r, const char* check, const std::string& detail);
// Prints "ERROR <what> returned ..." with ncclGetLastError and counts it unless got == want.
bool expectResult(Rank& r, const char* what, ncclResult_t got, ncclResult_t want);
inline bool expectOk(Rank& r, const char* what, ncclResult_t got) {
  return expectResult(r, what, got, ncclSuccess);
}

// ---- progress and steps (shim_stream_rank.cc) ----
// Names what the rank is doing, for the watchdog's message should it hang there.
void setStep(const char* step);
// Leaves the step file `name` for the other ranks.
void signalStep(const Rank& r, const std::string& name);
// Waits for another rank's step file (at most 20 s); an ERROR when it does not come.
bool waitStep(Rank& r, const std::string& name);

// ---- the stream log (shim_stream_rank.cc) ----
// The lines of `stream` after seq `after`, in order.
std::vector<LogLine> linesOf(const std::vector<LogLine>& log, const std::string& stream,
                             uint64_t after);
// The lines, one per row, for a failure message.
std::string describe(const std::vector<LogLine>& lines);

// ---- values: exact in float32 in any order of summation ----
inline float valueOf(int family, int rank, size_t i) {
  return static_cast<float>((rank + 1) * 1000 + family * 100 + static_cast<int>(i % 97));
}

// ---- the checks ----
void runOrderingChecks(Rank& r);  // (a) to (g): shim_stream_checks.cc
void runAbortCheck(Rank& r);      // (h): shim_stream_abort.cc

}  // namespace hc::shim_stream
