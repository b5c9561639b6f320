/* hc_shim_check --mode sim: collectives on simulated device memory (hetero_comm/hc_sim.h) through
 * the shim, in a process with no CUDA or HIP runtime. libnccl.so.2 ranks use sim "nvidia" memory
 * and streams, librccl.so.1 ranks sim "amd" ones; a sim stream goes where NCCL takes a
 * cudaStream_t (hipStream_t), and so does the NULL stream. Every byte moves between host mirrors
 * and the device buffers through hc_sim_memcpy, as it would through cudaMemcpyAsync, and the
 * expected values are computed here from each rank's inputs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/include/hetero_comm/hc.h"
#include "tests/integration/shim/shim_check.h"

/* hc_sim.h's functions and vendor values. This program links libnccl.so.2 (librccl.so.1) alone,
 * as a framework's program does, so it finds them in the libhcclient.so.1 the shim loaded. The
 * signatures are hc_sim.h's, with hc_sim_vendor_t passed as the int it is. */
enum { kSimNvidia = 1, kSimAmd = 2 }; /* HC_SIM_NVIDIA, HC_SIM_AMD */
typedef struct {
  hc_status_t (*malloc_)(void** ptr, size_t bytes, int vendor, int device);
  hc_status_t (*free_)(void* ptr);
  hc_status_t (*streamCreate)(hc_stream_t* stream, int vendor, int device);
  hc_status_t (*streamDestroy)(hc_stream_t stream);
  hc_status_t (*synchronize)(hc_stream_t stream);
  hc_status_t (*memcpy_)(void* dst, const void* src, size_t bytes, hc_stream_t stream);
  const char* (*lastError)(hc_comm_t comm);
} SimApi;

#if defined(HC_SHIM_CHECK_RCCL)
typedef hipStream_t Stream;
static const int kVendor = kSimAmd;
#else
typedef cudaStream_t Stream;
static const int kVendor = kSimNvidia;
#endif

/* Counts 0, 1, 7 and a larger odd one, whose bytes are no multiple of any chunk size. */
static const size_t kCounts[] = {0, 1, 7, 65537};
#define MAX_COUNT 65537
#define MAX_RANKS 8
/* What the receive buffer holds before an operation: above every result of up to MAX_RANKS
 * ranks (sums reach 8 * 9 / 2 + 8 * 16 = 164), and a uint8. */
#define SENTINEL 200.0

typedef enum { AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AllToAll, SendRecv } Op;
static const char* const kOpNames[] = {
    "ncclAllReduce",     "ncclReduce",   "ncclBroadcast",         "ncclAllGather",
    "ncclReduceScatter", "ncclAlltoAll", "ncclSend/ncclRecv ring"};
/* A dtype per operation, so that 1-, 4- and 8-byte elements all cross the device path. */
static const ncclDataType_t kOpTypes[] = {ncclFloat32, ncclInt32, ncclFloat64, ncclInt32,
                                          ncclFloat32, ncclInt64, ncclUint8};

typedef struct {
  Check* c;
  SimApi api;
  void* devA; /* the send buffer out of place */
  void* devB; /* the receive buffer, and both buffers in place */
  void* hostIn;
  void* hostOut;
  size_t bufBytes;
} SimRank;

typedef struct {
  Op op;
  size_t count;
  int root;
  int rank;
  int nranks;
} Case;

/* Rank r's input element i: small integers, so every sum is exact in any order. */
static double input(int r, size_t i) { return (double)(r + 1) + (double)(i % 17); }

static double sumOver(int nranks, size_t i) {
  double s = 0;
  for (int r = 0; r < nranks; ++r) s += input(r, i);
  return s;
}

/* Element i of the receive region, computed from the inputs alone. */
static double expected(size_t i, const void* ctx) {
  const Case* k = (const Case*)ctx;
  switch (k->op) {
    case AllReduce:
    case Reduce:
      return sumOver(k->nranks, i);
    case Broadcast:
      return input(k->root, i);
    case AllGather:
      return input((int)(i / k->count), i % k->count);
    case ReduceScatter:
      return sumOver(k->nranks, (size_t)k->rank * k->count + i);
    case AllToAll:
      return input((int)(i / k->count), (size_t)k->rank * k->count + i % k->count);
    case SendRecv:
      return input((k->rank + k->nranks - 1) % k->nranks, i);
  }
  return 0;
}

static int simOk(Check* c, const SimApi* api, const char* what, hc_status_t s) {
  if (s == HC_OK) return 1;
  printf("ERROR %s: hc status %d: %s\n", what, (int)s, api->lastError(NULL));
  c->wrong++;
  return 0;
}

static int findSimApi(Check* c, SimApi* api) {
  void* f[7];
  static const char* const names[] = {"hc_sim_malloc",
                                      "hc_sim_free",
                                      "hc_sim_stream_create",
                                      "hc_sim_stream_destroy",
                                      "hc_sim_stream_synchronize",
                                      "hc_sim_memcpy",
                                      "hc_get_last_error"};
  for (int i = 0; i < 7; ++i) {
    f[i] = dlsym(RTLD_DEFAULT, names[i]);
    if (f[i] == NULL) {
      printf("ERROR %s is not in this process: %s\n", names[i], dlerror());
      c->wrong++;
      return 0;
    }
  }
  /* POSIX guarantees that a function pointer survives the round trip through void*. */
  memcpy(&api->malloc_, &f[0], sizeof f[0]);
  memcpy(&api->free_, &f[1], sizeof f[1]);
  memcpy(&api->streamCreate, &f[2], sizeof f[2]);
  memcpy(&api->streamDestroy, &f[3], sizeof f[3]);
  memcpy(&api->synchronize, &f[4], sizeof f[4]);
  memcpy(&api->memcpy_, &f[5], sizeof f[5]);
  memcpy(&api->lastError, &f[6], sizeof f[6]);
  return 1;
}

static ncclResult_t issue(const Case* k, const void* send, void* recv, Check* c, Stream s) {
  const ncclDataType_t t = kOpTypes[k->op];
  const int next = (k->rank + 1) % k->nranks, prev = (k->rank + k->nranks - 1) % k->nranks;
  ncclResult_t r = ncclSuccess, end = ncclSuccess;
  switch (k->op) {
    case AllReduce:
      return ncclAllReduce(send, recv, k->count, t, ncclSum, c->comm, s);
    case Reduce:
      return ncclReduce(send, recv, k->count, t, ncclSum, k->root, c->comm, s);
    case Broadcast:
      return ncclBroadcast(send, recv, k->count, t, k->root, c->comm, s);
    case AllGather:
      return ncclAllGather(send, recv, k->count, t, c->comm, s);
    case ReduceScatter:
      return ncclReduceScatter(send, recv, k->count, t, ncclSum, c->comm, s);
    case AllToAll:
      return ncclAlltoAll(send, recv, k->count, t, c->comm, s);
    case SendRecv:
      r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(send, k->count, t, next, c->comm, s);
      if (r == ncclSuccess) r = ncclRecv(recv, k->count, t, prev, c->comm, s);
      end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
  }
  return ncclInvalidArgument;
}

/* One case: the receive area gets the sentinel and the send buffer the rank's input (both from
 * host mirrors, in stream order), the operation runs, and the receive region comes back to the
 * host mirror, which is checked. In place: NCCL's layouts (allgather's send buffer is the rank's
 * slot of the receive buffer; reduce-scatter's receive buffer the rank's slot of the send). */
static void runCase(SimRank* sr, const Case* k, int inPlace, hc_stream_t stream) {
  Check* c = sr->c;
  const SimApi* api = &sr->api;
  const ncclDataType_t t = kOpTypes[k->op];
  const size_t es = dtypeSize(t), n = (size_t)k->nranks, count = k->count;
  const int wide = k->op == ReduceScatter || k->op == AllToAll; /* input of n * count */
  const size_t inCount = wide ? n * count : count;
  const size_t outCount = k->op == AllGather || k->op == AllToAll ? n * count : count;
  size_t sendOff = 0, recvOff = 0; /* elements into devB, in place */
  if (inPlace && k->op == AllGather) sendOff = (size_t)k->rank * count;
  if (inPlace && k->op == ReduceScatter) recvOff = (size_t)k->rank * count;
  const size_t area =
      inCount + sendOff > outCount + recvOff ? inCount + sendOff : outCount + recvOff;
  char* devB = (char*)sr->devB;
  void* send = inPlace ? (void*)(devB + sendOff * es) : sr->devA;
  void* recv = devB + recvOff * es;

  char what[160];
  snprintf(what, sizeof what, "%s %s count %zu root %d, %s, %s", kOpNames[k->op],
           inPlace ? "in place" : "out of place", count, k->root,
           stream != NULL ? "sim stream" : "NULL stream", kVendor == kSimAmd ? "amd" : "nvidia");
  for (size_t i = 0; i < area; ++i) putValue(sr->hostOut, t, i, SENTINEL);
  for (size_t i = 0; i < inCount; ++i) putValue(sr->hostIn, t, i, input(k->rank, i));
  if (!simOk(c, api, "hc_sim_memcpy of the sentinel",
             api->memcpy_(devB, sr->hostOut, area * es, stream)) ||
      !simOk(c, api, "hc_sim_memcpy of the input",
             api->memcpy_(send, sr->hostIn, inCount * es, stream))) {
    return;
  }
  if (!CHECK_OK(c, what, issue(k, send, recv, c, (Stream)stream))) return;
  if (!simOk(c, api, "hc_sim_memcpy of the result",
             api->memcpy_(sr->hostOut, recv, outCount * es, stream))) {
    return;
  }
  if (stream != NULL && !simOk(c, api, "hc_sim_stream_synchronize", api->synchronize(stream))) {
    return;
  }
  if (k->op == Reduce && k->rank != k->root) return; /* only the root's buffer is defined */
  expectValues(c, what, sr->hostOut, t, outCount, expected, k);
}

/* The mode's premise: with a GPU runtime loaded the shim would take the sim stream for one of
 * that runtime's streams. */
static int noGpuRuntime(Check* c) {
  static const char* const runtimes[] = {"libcuda.so.1", "libamdhip64.so", "libamdhip64.so.5",
                                         "libamdhip64.so.6"};
  for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0]; ++i) {
    void* h = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL) {
      dlclose(h);
      printf("ERROR %s is loaded in this process; --mode sim needs none\n", runtimes[i]);
      c->wrong++;
      return 0;
    }
  }
  return 1;
}

void runSim(Check* c, const ModeArgs* m, ncclUniqueId id) {
  (void)m;
  SimRank sr = {c, {0}, NULL, NULL, NULL, NULL, 0};
  hc_stream_t stream = NULL;
  if (c->nranks > MAX_RANKS) {
    printf("ERROR --mode sim takes at most %d ranks\n", MAX_RANKS);
    c->wrong++;
    return;
  }
  if (!noGpuRuntime(c) || !findSimApi(c, &sr.api)) return;
  if (!CHECK_OK(c, "ncclCommInitRank", ncclCommInitRank(&c->comm, c->nranks, id, c->rank))) return;
  sr.bufBytes = (size_t)MAX_COUNT * MAX_RANKS * 8;
  sr.hostIn = malloc(sr.bufBytes);
  sr.hostOut = malloc(sr.bufBytes);
  if (sr.hostIn == NULL || sr.hostOut == NULL) {
    printf("ERROR malloc of the host mirrors (%zu bytes each)\n", sr.bufBytes);
    c->wrong++;
  }
  if (sr.hostIn != NULL && sr.hostOut != NULL &&
      simOk(c, &sr.api, "hc_sim_malloc", sr.api.malloc_(&sr.devA, sr.bufBytes, kVendor, 0)) &&
      simOk(c, &sr.api, "hc_sim_malloc", sr.api.malloc_(&sr.devB, sr.bufBytes, kVendor, 0)) &&
      simOk(c, &sr.api, "hc_sim_stream_create", sr.api.streamCreate(&stream, kVendor, 0))) {
    /* Registered device memory: imported by the daemon now, the cases below on it as on any. */
    void* regA = NULL;
    void* regB = NULL;
    CHECK_OK(c, "ncclCommRegister of sim memory",
             ncclCommRegister(c->comm, sr.devA, sr.bufBytes, &regA));
    CHECK_OK(c, "pncclCommRegister of sim memory",
             pncclCommRegister(c->comm, sr.devB, sr.bufBytes, &regB));
    expectResult(c, "ncclCommRegister past the end of a sim allocation",
                 ncclCommRegister(c->comm, (char*)sr.devA + 1, sr.bufBytes, &regA),
                 ncclInvalidArgument);
    for (int useStream = 0; useStream < 2; ++useStream) {
      for (size_t ci = 0; ci < sizeof kCounts / sizeof kCounts[0]; ++ci) {
        for (int op = AllReduce; op <= SendRecv; ++op) {
          const Case k = {(Op)op, kCounts[ci], (int)(kCounts[ci] % (size_t)c->nranks), c->rank,
                          c->nranks};
          runCase(&sr, &k, 0, useStream ? stream : NULL);
          if (op != AllToAll && op != SendRecv) runCase(&sr, &k, 1, useStream ? stream : NULL);
        }
      }
    }
    if (regA != NULL) CHECK_OK(c, "ncclCommDeregister", ncclCommDeregister(c->comm, regA));
    if (regB != NULL) CHECK_OK(c, "pncclCommDeregister", pncclCommDeregister(c->comm, regB));
  }
  if (stream != NULL) simOk(c, &sr.api, "hc_sim_stream_destroy", sr.api.streamDestroy(stream));
  CHECK_OK(c, "ncclCommFinalize", ncclCommFinalize(c->comm));
  CHECK_OK(c, "ncclCommDestroy", ncclCommDestroy(c->comm));
  if (sr.devA != NULL) simOk(c, &sr.api, "hc_sim_free", sr.api.free_(sr.devA));
  if (sr.devB != NULL) simOk(c, &sr.api, "hc_sim_free", sr.api.free_(sr.devB));
  free(sr.hostIn);
  free(sr.hostOut);
}
