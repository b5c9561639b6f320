// The cases the rank worker runs, and the runner that executes and verifies one case on one rank.
// Every rank builds the same case list, so op k is the same operation everywhere.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hetero_comm/hc.h"
#include "tests/integration/worker_device.h"
#include "tests/integration/worker_values.h"

namespace hc::integ {

// SendRecv is a ring exchange in one group: each rank sends to rank+1 and receives from rank-1.
enum class Coll {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllV,
  Gather,
  Scatter,
  SendRecv,
  Barrier
};

// Shared: buffers from hc_mem_alloc, which the daemon maps. User: plain heap memory the client
// library has to stage through its segment.
enum class Mem { Shared, User };

constexpr uint64_t kBigCount = (1ull << 20) + 3;

// Which pairs of an alltoallv exchange data. Mixed: seeded counts of 0, 1/3, 2/3 or all of the
// case's count. The others stress zero counts: nothing at all, only to self, rank 0 sending
// nothing (but receiving), each rank only to the next.
enum class Pattern { Mixed, AllZero, OnlySelf, SilentRank0, Ring };

struct Case {
  Coll coll = Coll::AllReduce;
  hc_dtype_t dtype = HC_FLOAT32;
  Red red = Red::Sum;
  uint64_t count = 0;  // allgather, gather: per rank sent; reduce_scatter, scatter: per rank
                       // received; alltoall: per peer; alltoallv: the largest per-peer count
  bool inPlace = false;
  int root = 0;
  uint64_t seed = 0;
  Mem mem = Mem::Shared;
  Special special = Special::None;   // narrow-float edge values (allreduce sum only)
  Pattern pattern = Pattern::Mixed;  // alltoallv only
  // Device runs: issued with a null stream (submitted by the CPU at once, like host memory) rather
  // than on the runner's stream.
  bool nullStream = false;
};

std::string_view collName(Coll coll);
bool isReduction(Coll coll);
bool hasRoot(Coll coll);
// Whether NCCL defines an in-place arrangement for the operation.
bool hasInPlace(Coll coll);
// "allreduce int32 prod count=7 in-place" (root for rooted ops, memory and edge values if set).
std::string describe(const Case& c);

// Every op x dtype x redop x count x placement, with roots varied, plus user-memory and edge-value
// cases; see worker_cases.cc for which large cases run.
std::vector<Case> matrixCases(int nranks, uint64_t seed);
// Each collective once at a few sizes, for scripts/demo.
std::vector<Case> demoCases(int nranks, uint64_t seed);
// Every alltoallv pattern over a few dtypes and counts.
std::vector<Case> alltoallvCases(uint64_t seed);
// For a GPU: every operation x fp32, fp16, bf16, int32 x every redop x counts 0, 1, 7, 1Mi+3 x
// both placements, half of them with a null stream.
std::vector<Case> gpuCases(int nranks, uint64_t seed);

struct WorkerOptions;
// Runs every case on --device (host memory without one), prints each wrong or failed one, then
// "cases ... seconds ..." and "#wrong <n>"; returns the exit code (worker_matrix.cc).
int runCaseList(hc_comm_t comm, const WorkerOptions& o, const std::vector<Case>& cases);

// The alltoallv layout of one rank: per-peer counts (some zero) and displacements with gaps, send
// blocks in reverse peer order and receive blocks in peer order, so that neither is the trivial
// packed layout.
struct AllToAllVLayout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  uint64_t sendExtent = 0;  // elements of the send buffer the layout spans
  uint64_t recvExtent = 0;
};
uint64_t alltoallvCount(const Case& c, int src, int dst, int nranks);
AllToAllVLayout alltoallvLayout(const Case& c, int rank, int nranks);
// Extra elements every buffer needs beyond nranks * count for the alltoallv gaps.
constexpr uint64_t alltoallvSlack(int nranks) { return 2 * static_cast<uint64_t>(nranks); }

struct CaseResult {
  hc_status_t status = HC_OK;
  std::string error;       // hc_get_last_error text when status != HC_OK
  uint64_t wrong = 0;      // elements that differ from the expected result (or were clobbered)
  std::string firstWrong;  // where the first wrong element is, and what it held
};

// The pointers one case passes and the part of the receive buffer it may write.
struct CaseBuffers {
  uint8_t* a = nullptr;  // out-of-place send buffer
  uint8_t* b = nullptr;  // receive buffer, and the one buffer of in-place cases
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t bExtent = 0;  // elements of b that were set to the sentinel before the call
};

// Fills the inputs of c into a or b, the sentinel into the rest of b, and sets send and recv.
void prepareCase(const Case& c, int rank, int nranks, CaseBuffers* bufs);
// Compares b (and a, which must be unchanged) with the independently computed results.
void verifyCase(const Case& c, int rank, int nranks, const CaseBuffers& bufs, CaseResult* out);

// Bytes one case needs in each of a and b (guard bytes included), on any rank.
uint64_t caseBufferBytes(const Case& c, int nranks);

// One transfer (send/recv pair) of rank src's seeded data, outside the case list. The sender
// fills its buffer; the receiver sets its buffer to the sentinel, then checks what arrived (and
// that the guard bytes after it are untouched).
void fillTransfer(hc_dtype_t dtype, uint64_t count, uint64_t seed, int src, int nranks,
                  uint8_t* send);
void clearTransfer(hc_dtype_t dtype, uint64_t count, uint8_t* recv);
void verifyTransfer(hc_dtype_t dtype, uint64_t count, uint64_t seed, int src, int nranks,
                    const uint8_t* recv, CaseResult* out);

// Runs cases on one rank of comm. Owns daemon-shared and plain heap buffers big enough for every
// case, and the pre-multiplied-sum operators of every dtype. On a device, the buffers of shared
// cases are device memory with host shadows: each case is prepared in the shadows, copied in on
// the runner's stream before it is issued, copied back after, and verified on the host.
class CaseRunner {
 public:
  CaseRunner(hc_comm_t comm, int rank, int nranks, DeviceChoice device = {});
  ~CaseRunner();
  CaseRunner(const CaseRunner&) = delete;
  CaseRunner& operator=(const CaseRunner&) = delete;

  // Opens the device and allocates the buffers for counts up to maxCount; returns the failure
  // text or "".
  std::string allocate(uint64_t maxCount);
  CaseResult run(const Case& c);

 private:
  hc_redop_t redopFor(const Case& c);
  // Posts c (a group for SendRecv) and returns its requests in *reqs.
  hc_status_t post(const Case& c, const void* send, void* recv, hc_stream_t stream,
                   std::vector<hc_request_t>* reqs);
  // Device mode: waits for the runner's stream and reports its (or the communicator's async)
  // error.
  hc_status_t synchronizeStream(std::string* error);
  // Device mode: moves the first `bytes` of both buffers in (toDevice) or out.
  hc_status_t moveBuffers(bool toDevice, uint64_t bytes, std::string* error);
  void setBufferScalar(hc_dtype_t dtype, bool valid);

  hc_comm_t comm_;
  int rank_;
  int nranks_;
  uint64_t bytes_ = 0;
  DeviceChoice choice_;
  WorkerDevicePtr device_;        // null for host memory
  hc_stream_t stream_ = nullptr;  // the stream of device_ every case is ordered on
  MirroredBuffer a_;              // hc_mem_alloc, or device memory and its shadow
  MirroredBuffer b_;
  uint8_t* scalars_ = nullptr;        // hc_mem_alloc: one 16-byte slot per dtype
  std::unique_ptr<uint8_t[]> userA_;  // plain heap memory (staging path)
  std::unique_ptr<uint8_t[]> userB_;
  std::map<hc_dtype_t, hc_redop_t> premulOps_;
  std::map<hc_dtype_t, hc_redop_t> premulBufferOps_;
};

}  // namespace hc::integ
