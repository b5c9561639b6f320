/* hc_shim_check's modes on communicators whose ranks all live in this one process:
 *
 *   init-all        ncclCommInitAll of --nranks ranks; each rank's allreduce through
 *                   ncclGroupStart/End from this thread, as NCCL programs drive such ranks
 *   finalize-abort  many one-rank communicators, each given a non-blocking ncclCommFinalize
 *                   and at once an ncclCommAbort from another thread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/integration/shim/shim_check.h"

#define MAX_DEV 16
#define READY_TIMEOUT_MS 30000.0

static double msNow(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Rank r's element k, and the sum over n ranks: small integers, exact in float. */
static float rankValue(int r, size_t k) { return (float)((r + 1) * (int)(k % 5 + 1)); }
typedef struct {
  int nranks;
} SumCtx;
static double sumAt(size_t k, const void* ctx) {
  const int n = ((const SumCtx*)ctx)->nranks;
  return (double)((int)(k % 5 + 1) * n * (n + 1) / 2);
}

/* A call that must fail leaves every comms[i] NULL. */
static void expectRefused(Check* c, const char* what, int ndev, const int* devlist,
                          ncclResult_t want) {
  ncclComm_t comms[MAX_DEV];
  for (int i = 0; i < MAX_DEV; ++i) comms[i] = (ncclComm_t)(size_t)0x1;
  expectResult(c, what, ncclCommInitAll(comms, ndev, devlist), want);
  for (int i = 0; i < ndev; ++i) {
    if (comms[i] != NULL) {
      printf("WRONG %s left comms[%d] set\n", what, i);
      c->wrong++;
      return;
    }
  }
}

/* One allreduce per rank inside one group, out of place or in place, checked on every rank. */
static void allreduceAll(Check* c, ncclComm_t* comms, int ndev, size_t count, int inPlace) {
  float* send[MAX_DEV];
  float* recv[MAX_DEV];
  for (int r = 0; r < ndev; ++r) {
    send[r] = malloc(count * sizeof(float));
    recv[r] = inPlace ? send[r] : malloc(count * sizeof(float));
    for (size_t k = 0; k < count; ++k) {
      send[r][k] = rankValue(r, k);
      if (!inPlace) recv[r][k] = -1.0f;
    }
  }
  char what[128];
  snprintf(what, sizeof what, "allreduce of %d ranks, count %zu%s", ndev, count,
           inPlace ? ", in place" : "");
  /* Each rank's call alone would wait for the others: the group submits them together. */
  int ok = CHECK_OK(c, "ncclGroupStart", ncclGroupStart());
  for (int r = 0; ok && r < ndev; ++r) {
    ok = CHECK_OK(c, what,
                  ncclAllReduce(send[r], recv[r], count, ncclFloat32, ncclSum, comms[r], NULL));
  }
  if (CHECK_OK(c, "ncclGroupEnd", ncclGroupEnd()) && ok) {
    const SumCtx ctx = {ndev};
    for (int r = 0; r < ndev; ++r) expectValues(c, what, recv[r], ncclFloat32, count, sumAt, &ctx);
  }
  for (int r = 0; r < ndev; ++r) {
    if (!inPlace) free(recv[r]);
    free(send[r]);
  }
}

void runInitAll(Check* c) {
  const int ndev = c->nranks;
  if (ndev > MAX_DEV) {
    printf("ERROR init-all takes at most %d ranks\n", MAX_DEV);
    c->wrong++;
    return;
  }
  const int twice[] = {1, 0, 1};
  const int negative[] = {0, -1};
  expectRefused(c, "ncclCommInitAll with ndev 0", 0, NULL, ncclInvalidArgument);
  expectRefused(c, "ncclCommInitAll with ndev -1", -1, NULL, ncclInvalidArgument);
  expectRefused(c, "ncclCommInitAll with a device twice", 3, twice, ncclInvalidUsage);
  expectRefused(c, "ncclCommInitAll with a negative device", 2, negative, ncclInvalidArgument);

  /* Devices in reverse, so that rank and device differ. */
  int devlist[MAX_DEV];
  for (int i = 0; i < ndev; ++i) devlist[i] = ndev - 1 - i;
  ncclComm_t comms[MAX_DEV] = {NULL};
  if (!CHECK_OK(c, "ncclCommInitAll", ncclCommInitAll(comms, ndev, devlist))) return;
  for (int i = 0; i < ndev; ++i) {
    int n = -1, rank = -1, device = -1;
    if (!CHECK_OK(c, "ncclCommCount", ncclCommCount(comms[i], &n)) ||
        !CHECK_OK(c, "ncclCommUserRank", ncclCommUserRank(comms[i], &rank)) ||
        !CHECK_OK(c, "ncclCommCuDevice", ncclCommCuDevice(comms[i], &device))) {
      continue;
    }
    if (n != ndev || rank != i || device != devlist[i]) {
      printf("WRONG comms[%d]: %d ranks, rank %d, device %d; want %d, %d, %d\n", i, n, rank, device,
             ndev, i, devlist[i]);
      c->wrong++;
    }
  }
  const size_t counts[] = {1, 4097};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
    allreduceAll(c, comms, ndev, counts[i], 0);
    allreduceAll(c, comms, ndev, counts[i], 1);
  }
  for (int i = 0; i < ndev; ++i) {
    CHECK_OK(c, "ncclCommFinalize", ncclCommFinalize(comms[i]));
    CHECK_OK(c, "ncclCommDestroy", ncclCommDestroy(comms[i]));
  }
}

typedef struct {
  ncclComm_t comm;
  atomic_int go;
  ncclResult_t result;
} Aborter;

/* Waits (yielding) for the word, then aborts: it is running when the finalize returns, so the
 * abort comes before the finalize's own thread has got far. */
static void* abortWhenTold(void* arg) {
  Aborter* a = (Aborter*)arg;
  while (!atomic_load(&a->go)) sched_yield();
  a->result = ncclCommAbort(a->comm);
  return NULL;
}

/* A one-rank non-blocking communicator of a fresh id, ready; NULL after an error. */
static ncclComm_t readyComm(Check* c) {
  ncclUniqueId id;
  if (!CHECK_OK(c, "ncclGetUniqueId", ncclGetUniqueId(&id))) return NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  if (r != ncclInProgress && !CHECK_OK(c, "ncclCommInitRankConfig", r)) return NULL;
  ncclResult_t async = ncclInProgress;
  for (double start = msNow(); async == ncclInProgress && msNow() - start < READY_TIMEOUT_MS;) {
    if (!CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async))) break;
  }
  if (!expectResult(c, "the one-rank init", async, ncclSuccess)) return NULL;
  return comm;
}

void runFinalizeAbort(Check* c) {
  enum { kIterations = 300 };
  for (int i = 0; i < kIterations && c->wrong == 0; ++i) {
    ncclComm_t comm = readyComm(c);
    if (comm == NULL) return;
    float x = 1.0f;
    CHECK_OK(c, "ncclAllReduce", ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL));
    Aborter a = {comm, 0, ncclInternalError};
    pthread_t thread;
    if (pthread_create(&thread, NULL, abortWhenTold, &a) != 0) {
      printf("ERROR pthread_create\n");
      c->wrong++;
      return;
    }
    /* Returns at once; its thread calls hc_comm_finalize, perhaps after the abort is done. */
    expectResult(c, "non-blocking ncclCommFinalize", ncclCommFinalize(comm), ncclInProgress);
    atomic_store(&a.go, 1);
    pthread_join(thread, NULL);
    expectResult(c, "ncclCommAbort racing the finalize", a.result, ncclSuccess);
  }
  printf("finalize-abort: %d iterations done\n", kIterations);
}
