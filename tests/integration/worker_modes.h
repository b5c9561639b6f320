// The modes of hc_rank_worker. Each runs on one initialized communicator and returns the process
// exit code: 0 success, 1 wrong results, 2 bad arguments, 3 an operation failed.
//
// Lines the tests parse (one per line on stdout):
//   ready                      the communicator is initialized
//   progress <iteration>       loop mode is running collectives
//   stalled / idle             stall and idle modes reached their waiting point
//   result status=<n> text=<t> the outcome of the operation the mode is about
//   later status=<n> text=<t>  mismatch mode: the op after the mismatched one
//   #wrong <n>                 matrix and demo modes: elements that differed
#pragma once

#include <cstdint>
#include <string>

#include "hetero_comm/hc.h"

namespace hc::integ {

constexpr int kExitOk = 0;
constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;
constexpr int kExitOpFailed = 3;

struct WorkerOptions {
  int rank = -1;
  int nranks = 0;
  std::string mode;
  uint64_t seed = 1;
  uint64_t count = 65536;   // loop mode: int32 elements per allreduce
  double seconds = 0;       // loop mode: stop after this long (0: only on error or --iters)
  uint64_t iters = 0;       // loop mode: stop after this many iterations (0: no limit)
  uint64_t stallAfter = 0;  // loop mode: stop posting ops after this many iterations, then sleep
  std::string goFile;       // idle mode: wait until this file exists
  std::string field;        // mismatch mode: count, dtype, redop, root or op
};

// Prints "<tag> status=<n> text=<last error of comm>".
void printStatus(const char* tag, hc_status_t status, hc_comm_t comm);

int runMatrix(hc_comm_t comm, const WorkerOptions& o);
int runDemo(hc_comm_t comm, const WorkerOptions& o);
// Allreduce (verified) + a broadcast of rank 0's stop flag, repeated.
int runLoop(hc_comm_t comm, const WorkerOptions& o);
// Loop mode that stops posting ops after --stall-after iterations (default 1) and sleeps: its
// peers block in hc_wait on it.
int runHang(hc_comm_t comm, const WorkerOptions& o);
// One verified allreduce, then waits for goFile, then one more allreduce whose status it prints.
int runIdle(hc_comm_t comm, const WorkerOptions& o);
// A warm-up allreduce, one collective whose descriptor differs between ranks, one more allreduce.
int runMismatch(hc_comm_t comm, const WorkerOptions& o);

}  // namespace hc::integ
