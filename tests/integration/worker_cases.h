// The collective cases the rank worker runs, and the runner that executes and verifies one case
// on one rank. Every rank builds the same case list, so op k is the same collective everywhere.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hetero_comm/hc.h"
#include "tests/integration/worker_values.h"

namespace hc::integ {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Barrier };

constexpr uint64_t kBigCount = (1ull << 20) + 3;

struct Case {
  Coll coll = Coll::AllReduce;
  hc_dtype_t dtype = HC_FLOAT32;
  Red red = Red::Sum;
  uint64_t count = 0;  // allgather: per rank sent; reduce_scatter: per rank received
  bool inPlace = false;
  int root = 0;
  uint64_t seed = 0;
};

std::string_view collName(Coll coll);
bool isReduction(Coll coll);
bool hasRoot(Coll coll);
// "allreduce int32 prod count=7 in-place" (root for broadcast/reduce).
std::string describe(const Case& c);

// Every op x dtype x redop x count x placement, with roots varied; see worker_cases.cc for which
// large cases run.
std::vector<Case> matrixCases(int nranks, uint64_t seed);
// Each collective once at a few sizes, for scripts/demo.
std::vector<Case> demoCases(int nranks, uint64_t seed);

struct CaseResult {
  hc_status_t status = HC_OK;
  std::string error;       // hc_get_last_error text when status != HC_OK
  uint64_t wrong = 0;      // elements that differ from the expected result (or were clobbered)
  std::string firstWrong;  // where the first wrong element is, and what it held
};

// Runs cases on one rank of comm. Owns two daemon-shared buffers big enough for every case.
class CaseRunner {
 public:
  CaseRunner(hc_comm_t comm, int rank, int nranks);
  ~CaseRunner();
  CaseRunner(const CaseRunner&) = delete;
  CaseRunner& operator=(const CaseRunner&) = delete;

  // Allocates the buffers for counts up to maxCount; returns the failure text or "".
  std::string allocate(uint64_t maxCount);
  CaseResult run(const Case& c);

 private:
  hc_redop_t redopFor(const Case& c);
  hc_status_t issue(const Case& c, const void* send, void* recv);

  hc_comm_t comm_;
  int rank_;
  int nranks_;
  uint8_t* a_ = nullptr;  // out-of-place send buffer
  uint8_t* b_ = nullptr;  // receive buffer, and the one buffer of in-place cases
  uint64_t bytes_ = 0;
  std::map<hc_dtype_t, hc_redop_t> premulOps_;
};

}  // namespace hc::integ
