// The modes of hc_rank_worker. Each runs on one initialized communicator and returns the process
// exit code: 0 success, 1 wrong results, 2 bad arguments, 3 an operation failed.
//
// Lines the tests parse (one per line on stdout):
//   ready                      the communicator is initialized
//   progress <iteration>       loop mode is running collectives
//   stalled / idle             stall and idle modes reached their waiting point
//   result status=<n> text=<t> the outcome of the operation the mode is about
//   later status=<n> text=<t>  mismatch mode: the op after the mismatched one
//   #wrong <n>                 modes that verify data: elements that differed
//   posted                     abort mode: the rank's pending group or split is posted
//   check <name> status=<n> text=<t>   badargs mode: the outcome of one invalid call
//   split rank=<r> size=<n>    split mode: this rank's place in its new communicator
//   shrink status=<s> rank=<r> size=<n> text=<t>   shrink modes: the shrink's outcome and place
//   revoke / finalize status=<n> text=<t>          revoke mode: the revoker's two calls
//   order posted_ms=<x> done_ms=<y> long_ms=<l> long_end_ms=<z>   gpuorder mode (see below)
//   memory start_free=<MiB> low_free=<MiB> end_free=<MiB> margin=<MiB>   gpumemory mode
//   perf allreduce bytes=<n> us=<t> busbw_GBps=<x> / perf copy bytes=<n> GBps=<x>   gpuperf
#pragma once

#include <cstdint>
#include <string>

#include "hetero_comm/hc.h"

namespace hc::integ {

constexpr int kExitOk = 0;
constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;
constexpr int kExitOpFailed = 3;
constexpr int kExitHung = 4;

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
  std::string field;        // mismatch mode: count, dtype, redop, root, op, sendcount, senddtype
  std::string phase;        // abort mode: group or split (what is pending when the abort comes);
                            // shrink modes: abort (HC_SHRINK_ABORT) or default
  int aborter = -1;         // abort mode: the rank that calls hc_comm_abort (default: the last)
  std::string exclude;      // shrink modes: the ranks to exclude, "1,3" ("" none)
  // "sim:nvidia:0" / "sim:amd:1" / "cuda:0": the buffers live on that device (a simulated one,
  // hetero_comm/hc_sim.h, or a CUDA GPU in hc_gpu_worker) and operations are ordered on a stream
  // of it (worker_device.h); "" = host memory.
  std::string device;
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
// One verified allreduce, "idle", then hc_comm_get_async_error every 5 ms with nothing
// outstanding, as a framework's watchdog polls: prints "async status=N" when it reports an error
// (exit 3), or after 30 s without one (exit 0).
int runWatchIdle(hc_comm_t comm, const WorkerOptions& o);
// A warm-up allreduce, one collective whose descriptor differs between ranks, one more allreduce.
int runMismatch(hc_comm_t comm, const WorkerOptions& o);
// Alltoallv layouts with zero counts (none at all, only to self, one silent sender, a ring).
int runAllToAllV(hc_comm_t comm, const WorkerOptions& o);
// --iters seeded random groups of sends, receives and collectives, each rank posting its group
// in its own shuffled order.
int runGroups(hc_comm_t comm, const WorkerOptions& o);
// One group larger than the daemon's in-flight limit (send/recv pairs with the next rank).
int runBigGroup(hc_comm_t comm, const WorkerOptions& o);
// Splits into several colors (and a NOCOLOR rank), runs verified collectives on every new
// communicator at once, then on the parent.
int runSplit(hc_comm_t comm, const WorkerOptions& o);
// Every rank but the last posts a group (or a split) the last rank never joins; once goFile
// exists the aborter calls hc_comm_abort. Prints "result status=" for what each rank waited on.
// Ends the communicator: the caller must not destroy it.
int runAbort(hc_comm_t comm, const WorkerOptions& o);
// Shrink modes (worker_shrink_modes.cc); --phase abort shrinks with HC_SHRINK_ABORT, else
// HC_SHRINK_DEFAULT. Each leaves the parent failed or revoked: the caller aborts it.
// Verified allreduces until one fails (the test kills a peer), "result status=", then shrink by
// --exclude and --iters (default 100) verified allreduces on the child ("#wrong").
int runShrink(hc_comm_t comm, const WorkerOptions& o);
// The last rank revokes while the others wait in an allreduce it never posts ("result status="
// for them; "revoke" and "finalize" for it); they revoke too, every rank splits the revoked
// communicator by parity ("split status=", "half status= wrong="), then shrinks by --exclude and
// goes on.
int runRevoke(hc_comm_t comm, const WorkerOptions& o);
// Rank 0 posts an allreduce nobody else does; every rank shrinks with HC_SHRINK_DEFAULT
// ("default status=", refused: the parent is busy), then with HC_SHRINK_ABORT and goes on;
// rank 0 then prints its allreduce's end ("pending status=").
int runShrinkBusy(hc_comm_t comm, const WorkerOptions& o);
// Shrinks by this rank's --exclude at once: exit 0 when refused ("shrink status=" says how).
int runShrinkMismatch(hc_comm_t comm, const WorkerOptions& o);
// Every data operation over fp32, bf16, int64 and fp8 e4m3 at counts 0, 1, 7, 4097 (every redop)
// and 1Mi+3 (sum), in place and out of place (worker_multinode.cc): the multi-daemon tests' grid.
int runGrid(hc_comm_t comm, const WorkerOptions& o);
// Invalid arguments the client library or the daemon must refuse, then a verified exchange
// showing the communicator still works.
int runBadArgs(hc_comm_t comm, const WorkerOptions& o);

// --iters (default 8) verified int32 allreduces of --count elements on simulated device memory,
// each ordered on a sim stream; prints "op <k> status=<n> wrong=<w> text=<t>" for each and goes on
// after a failed one (worker_device_modes.cc).
int runDeviceOps(hc_comm_t comm, const WorkerOptions& o);
// The same with a ring of send/recv (to rank + 1, from rank - 1) in one group: each rank checks
// what its predecessor sent.
int runDeviceSendRecv(hc_comm_t comm, const WorkerOptions& o);
// Rank 0 posts one stream-ordered allreduce with no request and waits on its stream; the other
// ranks never post. Prints "posted", then "stream status=" and "result status=" (the async error)
// once something ends the wait (a dead daemon, an abort).
int runStreamWait(hc_comm_t comm, const WorkerOptions& o);

// The GPU modes (worker_gpu_modes.cc, worker_gpu_perf.cc), for scripts/gpu-check; all need
// --device, and run the same steps on a sim device as on a CUDA GPU.
// The case list of gpuCases (worker_cases.h): "cases ..." and "#wrong <n>" as in matrix mode.
int runGpu(hc_comm_t comm, const WorkerOptions& o);
// Each rank puts about 300 ms of work on its stream, then a --count int32 allreduce behind it.
// Wrong (each a "WRONG order:" line) if the call keeps the CPU over 50 ms, if the result is
// visible while the long work runs (looked at after 100 ms, from outside the stream), or if the
// stream passes the allreduce before the long work ended. Prints "order ..." (milliseconds since
// the long work was queued: the call's own time, when the stream passed the allreduce and the
// long work) and "#wrong <n>".
int runGpuOrder(hc_comm_t comm, const WorkerOptions& o);
// Rank 1 posts a --count int32 allreduce on its stream, prints "posted" and SIGKILLs itself; the
// others post three and must see them fail (none hanging, none succeeding after a failure):
// "op <k> status=", "result status=<first failure>", and "#wrong 0" when the failure was clean.
// Leaves the communicator failed: the caller aborts it.
int runGpuKill(hc_comm_t comm, const WorkerOptions& o);
// Free device memory before, during and after 3 allreduces on two fresh buffers of --count
// floats; wrong if it ends more than 64 MiB below the start 2 s after every rank freed them.
// Devices that do not count their memory (sim) print "memory skipped: ..." and "#wrong 0".
int runGpuMemory(hc_comm_t comm, const WorkerOptions& o);
// Float sum allreduce bandwidth from 1 MiB to --count bytes (doubling, as far as every rank
// fits), median of 5 after 2 warm-ups; then a device-to-device copy of the largest size; "#wrong"
// counts wrong elements of the last allreduce.
int runGpuPerf(hc_comm_t comm, const WorkerOptions& o);

// Waits for a request, giving up after timeoutMs (then *req is left pending): HC_TIMEOUT.
hc_status_t waitFor(hc_request_t* req, int timeoutMs);

// A thread that ends the process (exit code kExitHung, after printing "HUNG <what>") when the
// worker makes no progress for the given time: a hang becomes a prompt, named failure, and the
// daemon fails the peers of the vanished rank instead of letting them wait too.
void startWatchdog(int seconds);
// Progress: resets the watchdog's clock and names what the worker does next.
void watchdogNote(const std::string& what);

}  // namespace hc::integ
