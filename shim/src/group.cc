// Groups (with communicator inits inside them), completion of NULL-stream operations,
// pre-multiplied sums and ncclMemAlloc.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "shim/src/comm_table.h"
#include "shim/src/shim.h"

using hc::shim::asHc;
using hc::shim::fail;
using hc::shim::fromHc;

namespace {

// A NULL-stream operation issued inside a group: waited for at the outermost ncclGroupEnd.
struct Pending {
  hc_request_t req;
  ncclComm_t comm;
};

// An init issued inside a group (hc runs it non-blocking): the outermost ncclGroupEnd waits for
// it when the caller's communicator is blocking.
struct PendingInit {
  ncclComm_t comm;
  bool blocking;
};

// The process's stream mode (orderOnStreams).
std::atomic<bool> gStreamsOrdered{false};

// Per thread, as NCCL's groups are.
thread_local int tlsGroupDepth = 0;
thread_local std::vector<Pending> tlsPending;
thread_local std::vector<PendingInit> tlsPendingInits;

// One look at a non-blocking init: HC_IN_PROGRESS while it runs. Under the side table's lock, so
// a watchdog thread's ncclCommAbort cannot free the handle meanwhile.
hc_status_t initState(ncclComm_t comm) {
  hc::shim::CommLookup live(comm);
  if (live.info() == nullptr) return HC_UNAVAILABLE;  // destroyed or aborted meanwhile
  hc_status_t async = HC_OK;
  const hc_status_t s = hc_comm_get_async_error(asHc(comm), &async);
  return s != HC_OK ? s : async;
}

// Waits for the init of comm to finish. Sleeps between looks (50 us, doubling up to 10 ms), so a
// slow join costs no CPU; bounded because hc fails the init at the daemon's comm.init_timeout_ms,
// and at once when the daemon dies.
ncclResult_t waitForInit(ncclComm_t comm) {
  useconds_t sleepUs = 50;
  hc_status_t s = initState(comm);
  while (s == HC_IN_PROGRESS) {
    ::usleep(sleepUs);
    sleepUs = std::min<useconds_t>(sleepUs * 2, 10000);
    s = initState(comm);
  }
  if (s == HC_UNAVAILABLE && hc::shim::findComm(comm) == nullptr) {
    return fail(ncclInvalidUsage,
                "a communicator initialized inside this group was destroyed "
                "or aborted before ncclGroupEnd");
  }
  return fromHc(s, comm);
}

}  // namespace

namespace hc::shim {

int groupDepth() { return tlsGroupDepth; }

void deferInit(ncclComm_t comm, bool blocking) { tlsPendingInits.push_back({comm, blocking}); }

void orderOnStreams(ncclComm_t comm) {
  const hc_runtime_t runtime = thisLibrary() == Library::Nccl ? HC_RUNTIME_CUDA : HC_RUNTIME_HIP;
  // HC_NOT_FOUND: no runtime in this process, which is the host-only mode, not an error.
  if (comm != nullptr && hc_comm_order_on_streams(asHc(comm), runtime) == HC_OK) {
    gStreamsOrdered.store(true, std::memory_order_relaxed);
  }
}

bool streamsOrdered() { return gStreamsOrdered.load(std::memory_order_relaxed); }

ncclResult_t trackOrWait(ncclComm_t comm, hc_request_t req) {
  if (tlsGroupDepth > 0) {
    tlsPending.push_back({req, comm});
    return ncclSuccess;
  }
  return fromHc(hc_wait(&req), comm);
}

}  // namespace hc::shim

extern "C" {

ncclResult_t ncclGroupStart(void) {
  const hc_status_t s = hc_group_start();
  if (s != HC_OK) return fromHc(s, nullptr);
  ++tlsGroupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (tlsGroupDepth == 0) {
    return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  }
  const hc_status_t s = hc_group_end();
  --tlsGroupDepth;
  // hc failed the group because one of its calls was on a communicator still initializing.
  ncclResult_t result = s == HC_IN_PROGRESS ? hc::shim::notReady(nullptr) : fromHc(s, nullptr);
  if (tlsGroupDepth > 0) return result;
  // The outermost end submitted the group: wait for every NULL-stream operation in it, each
  // request freed whatever the outcome, and report the group's error or the first failure.
  std::vector<Pending> pending;
  pending.swap(tlsPending);
  for (Pending& p : pending) {
    const ncclResult_t r = fromHc(hc_wait(&p.req), p.comm);
    if (result == ncclSuccess) result = r;
  }
  // Then the inits of the group, which every rank started without blocking: a blocking
  // communicator is ready when ncclGroupEnd returns; a non-blocking one still initializing makes
  // it ncclInProgress (ncclCommGetAsyncError tells when it is done), as NCCL does.
  std::vector<PendingInit> inits;
  inits.swap(tlsPendingInits);
  for (const PendingInit& init : inits) {
    ncclResult_t r = ncclSuccess;
    if (init.blocking) {
      r = waitForInit(init.comm);
    } else {
      const hc_status_t s = initState(init.comm);
      r = s == HC_UNAVAILABLE && hc::shim::findComm(init.comm) == nullptr ? ncclSuccess
                                                                          : fromHc(s, init.comm);
    }
    if (result == ncclSuccess || (result == ncclInProgress && r != ncclSuccess)) result = r;
  }
  return result;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (op == nullptr || comm == nullptr) {
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or comm is NULL");
  }
  hc_dtype_t dt;
  const ncclResult_t r = hc::shim::toHcDtype(datatype, &dt);
  if (r != ncclSuccess) return r;
  hc_redop_t created = HC_SUM;
  const hc_status_t s = hc_redop_create_premul_sum(
      &created, scalar, dt, static_cast<hc_scalar_residence_t>(static_cast<int>(residence)),
      asHc(comm));
  if (s != HC_OK) return fromHc(s, comm);
  *op = static_cast<ncclRedOp_t>(static_cast<int>(created));
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  return fromHc(hc_redop_destroy(static_cast<hc_redop_t>(static_cast<int>(op)), asHc(comm)), comm);
}

// Device memory of this library's runtime (CUDA for libnccl, HIP for librccl) where the process
// has loaded it, as NCCL gives; else daemon-segment host memory, which operations use zero-copy.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  const hc_runtime_t runtime =
      hc::shim::thisLibrary() == hc::shim::Library::Nccl ? HC_RUNTIME_CUDA : HC_RUNTIME_HIP;
  const hc_status_t s = hc_mem_alloc_device(ptr, size, runtime);
  if (s != HC_NOT_FOUND) return fromHc(s, nullptr);
  return hc::shim::fromHcConnecting(hc_mem_alloc(ptr, size), "ncclMemAlloc");
}

ncclResult_t ncclMemFree(void* ptr) { return fromHc(hc_mem_free(ptr), nullptr); }

}  // extern "C"

HC_NCCL_TWIN(ncclGroupStart)
HC_NCCL_TWIN(ncclGroupEnd)
HC_NCCL_TWIN(ncclRedOpCreatePreMulSum)
HC_NCCL_TWIN(ncclRedOpDestroy)
HC_NCCL_TWIN(ncclMemAlloc)
HC_NCCL_TWIN(ncclMemFree)
