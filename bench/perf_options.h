// hc-perf command line: nccl-tests flags (-b -e -f -i -n -w -c -T) plus the operation (-o),
// types (-d), reduction operators (-r), root (-R), how many local ranks to launch (-N) and the
// daemon socket (-s), or several daemons' sockets (--sockets) to spread the ranks over. Names
// printed in the table follow nccl-tests ("float", "half", "bfloat16", "f8e4m3", "sum", "none").
// sendrecv is nccl-tests' ring exchange (each rank sends to rank+1 and receives from rank-1), so
// with -N 2 it measures the point-to-point bandwidth between two ranks in both directions at once.
// --device puts the ranks' buffers in simulated device memory (hetero_comm/hc_sim.h), so the
// daemons' device path (staging, device reductions) is what gets timed. --api nccl times the same
// rows through NCCL's API as the shim's libnccl.so.2 provides it, so what the shim adds shows
// beside hc_*. --latency times each operation alone (issue, wait, then the next).
#pragma once

#include <hetero_comm/hc.h>
#include <hetero_comm/hc_sim.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hc::bench {

enum class OpKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  SendRecv,
  Barrier
};

// hc_redop_t has no "none"; collectives without a reduction carry this.
constexpr hc_redop_t kNoRedop = HC_NUM_OPS;

// The API the ranks time: libhcclient's hc_* (hc_get_unique_id, hc_comm_init_rank, hc_mem_alloc,
// hc_allreduce...) or NCCL's, from the shim's libnccl.so.2 (ncclGetUniqueId, ncclCommInitRank,
// ncclMemAlloc, ncclAllReduce... with the NULL stream for host buffers).
enum class Api { Hc, Nccl };

constexpr int kMaxRanks = 64;  // the checked data stays exact up to here (see check_data.h)

// Where a rank's send and receive buffers live.
struct BufferPlace {
  bool sim = false;   // false: host memory, the daemon's shared segment (hc_mem_alloc) unless heap
  bool heap = false;  // host memory of the process's own (the client stages it), as a framework's
  hc_sim_vendor_t vendor = HC_SIM_NVIDIA;
  int index = 0;
};

struct Options {
  size_t minBytes = size_t{32} << 20;
  size_t maxBytes = size_t{32} << 20;
  uint64_t stepFactor = 1;  // > 1: multiply; 1: add stepBytes (as nccl-tests)
  size_t stepBytes = size_t{1} << 20;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::vector<OpKind> ops{OpKind::AllReduce};
  std::vector<hc_dtype_t> dtypes{HC_FLOAT32};
  std::vector<hc_redop_t> redops{HC_SUM};
  int root = 0;
  int nranks = 2;
  std::string socket;  // empty: HC_SOCKET or the default path, as the client library resolves it
  // Two or more daemons (--sockets, else HC_PERF_SOCKETS): ranks go to them in contiguous blocks
  // (daemonOfRank), and the unique id is made while connected to the first. Empty: one daemon,
  // `socket`; a single path given this way is moved to `socket`.
  std::vector<std::string> sockets;
  // --device: empty, every rank on host; one entry, every rank there; else one entry per rank.
  std::vector<BufferPlace> devices;
  int timeoutSec = 0;  // 0: wait for ranks without limit (nccl-tests -T)
  Api api = Api::Hc;
  // Each operation alone: issue, wait for it, then issue the next; every size gets a median.
  // Otherwise a timed batch issues -n operations back to back and then waits for them.
  bool latency = false;
  bool smallOps = false;  // --small-ops: communicators made with hc_config_t host_small_ops
  bool membw = true;    // measure memory bandwidth around large rows and bound them
  size_t llcBytes = 0;  // --llc: the last-level cache size; 0: from sysfs or cpuid
  uint64_t seed = 0x6863'7065'7266ull;
};

// Parses argv. Returns the exit code when the program should stop (--help: 0, bad flags: 2).
std::optional<int> parseOptions(int argc, char** argv, Options* out);

// The index in opts.sockets of the daemon that hosts rank r (opts.sockets not empty). Contiguous
// blocks whose sizes differ by at most one, larger first, so every daemon hosts a rank:
// -N 4 over 2 daemons is 0,1 | 2,3; -N 5 over 2 is 0,1,2 | 3,4; -N 5 over 4 is 0,1 | 2 | 3 | 4.
int daemonOfRank(const Options& opts, int rank);

// Where rank r's buffers live (opts.devices).
BufferPlace placeOfRank(const Options& opts, int rank);
bool anyRankOnDevice(const Options& opts);
bool anyRankOnHost(const Options& opts);
// "host", "sim:nvidia:0", "sim:amd:1": what --device accepts, and what the preamble prints.
std::optional<BufferPlace> parsePlace(const std::string& text);
std::string placeName(const BufferPlace& place);

// "8", "512K", "64M", "1G" (binary multiples, as nccl-tests).
std::optional<size_t> parseSize(const std::string& text);

const char* opName(OpKind op);
const char* dtypeName(hc_dtype_t dtype);
const char* redopName(hc_redop_t redop);
size_t dtypeSize(hc_dtype_t dtype);
bool hasRedop(OpKind op);
bool hasRoot(OpKind op);
const char* apiName(Api api);
// Whether the API has the operation (NCCL has no barrier).
bool apiHasOp(Api api, OpKind op);
// Whether the operation has an in-place form (nccl-tests times none for alltoall and sendrecv,
// and hetero-comm refuses an all-to-all in place).
bool hasInPlace(OpKind op);

}  // namespace hc::bench
