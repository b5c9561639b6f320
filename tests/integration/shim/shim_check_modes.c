/* hc_shim_check's modes: one scenario per run, for the lifecycle and fault tests of
 * tests/integration/shim/shim_lifecycle_test.cc. Ranks of one job order their steps through
 * files in a shared folder (--sync DIR): a rank that must not be blocked proves it by creating a
 * file that another rank waits for before it takes the step that would unblock the first. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/shim/shim_check.h"

/* How long a rank waits for another's step or for an operation before it reports an error: far
 * beyond what each step takes, so only a hang gets there. */
#define STEP_TIMEOUT_MS 30000

#if defined(HC_SHIM_CHECK_RCCL)
typedef hipStream_t Stream;
#else
typedef cudaStream_t Stream;
#endif

/* A stream handle of no runtime: none is loaded in these processes, so hc submits the operation
 * and the call returns at once, as it does on a real stream; ncclCommFinalize is what waits. */
static Stream someStream(void) { return (Stream)(uintptr_t)0x5e; }

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleepMs(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static void stepPath(const ModeArgs* m, const char* step, char* out, size_t n) {
  snprintf(out, n, "%s/%s", m->syncDir, step);
}

static void signalStep(const ModeArgs* m, const char* step) {
  char path[4096];
  stepPath(m, step, path, sizeof path);
  FILE* f = fopen(path, "w");
  if (f != NULL) fclose(f);
}

static int waitStep(Check* c, const ModeArgs* m, const char* step) {
  char path[4096];
  stepPath(m, step, path, sizeof path);
  for (double start = nowMs(); nowMs() - start < STEP_TIMEOUT_MS; sleepMs(5)) {
    if (access(path, F_OK) == 0) return 1;
  }
  printf("ERROR rank %d: step '%s' of another rank did not come within %d ms\n", c->rank, step,
         STEP_TIMEOUT_MS);
  c->wrong++;
  return 0;
}

/* Polls ncclCommGetAsyncError until it is no longer ncclInProgress; returns what it became. */
static ncclResult_t waitReady(Check* c, ncclComm_t comm, const char* what) {
  ncclResult_t async = ncclInProgress;
  for (double start = nowMs(); nowMs() - start < STEP_TIMEOUT_MS; sleepMs(1)) {
    if (!CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async))) return async;
    if (async != ncclInProgress) return async;
  }
  printf("ERROR %s: still ncclInProgress after %d ms\n", what, STEP_TIMEOUT_MS);
  c->wrong++;
  return async;
}

static void expectAsync(Check* c, ncclComm_t comm, const char* what, ncclResult_t want) {
  ncclResult_t async = ncclInternalError;
  if (CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async))) {
    expectResult(c, what, async, want);
  }
}

/* An allreduce of rank + 1 over comm, checked against the sum over its ranks. */
static void checkSum(Check* c, ncclComm_t comm, const char* what) {
  int n = 0, x = c->rank + 1, want = 0;
  if (!CHECK_OK(c, "ncclCommCount", ncclCommCount(comm, &n))) return;
  for (int r = 0; r < c->nranks; ++r) want += r + 1;
  if (CHECK_OK(c, what, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL)) && x != want) {
    printf("WRONG %s: %d, want %d\n", what, x, want);
    c->wrong++;
  }
}

/* Non-blocking communicators, one way per rank: rank 0 by its ncclConfig_t, rank 1 by
 * NCCL_COMM_BLOCKING=0 and no config, rank 2 by ncclCommInitRankScalable inside a group (its
 * ncclGroupEnd is what returns ncclInProgress). The inits start in the order 2, 0, 1, each after
 * the previous one returned, so ranks 2 and 0 see their init still waiting. Then a split with a
 * NULL config (inheriting non-blocking) and a finalize that returns while an operation waits for
 * the other ranks, which post theirs only after that. */
static void runNonBlocking(Check* c, const ModeArgs* m, ncclUniqueId id) {
  const int me = c->rank, n = c->nranks;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if (me == 0 && !waitStep(c, m, "r2-init-started")) return;
  if (me == 1 && !waitStep(c, m, "r0-init-started")) return;
  if (strcmp(m->by, "group") == 0) {
    if (!CHECK_OK(c, "ncclGroupStart", ncclGroupStart()) ||
        !CHECK_OK(c, "ncclCommInitRankScalable in a group",
                  ncclCommInitRankScalable(&c->comm, n, me, 1, &id, &config)) ||
        !expectResult(c, "ncclGroupEnd of a non-blocking init", ncclGroupEnd(), ncclInProgress)) {
      return;
    }
  } else {
    ncclResult_t r = strcmp(m->by, "env") == 0
                         ? ncclCommInitRank(&c->comm, n, id, me)
                         : ncclCommInitRankConfig(&c->comm, n, id, me, &config);
    if (!expectResult(c, "non-blocking init", r, ncclInProgress)) return;
  }
  if (c->comm == NULL) {
    printf("ERROR non-blocking init gave no communicator\n");
    c->wrong++;
    return;
  }
  if (me != 1) {
    /* Rank 1 has not begun its init, so this one cannot have finished. */
    expectAsync(c, c->comm, "async state of an init waiting for rank 1", ncclInProgress);
    float x = 1.0f;
    expectResult(c, "ncclAllReduce before the init finished",
                 ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c->comm, NULL),
                 ncclInvalidArgument);
  }
  signalStep(m, me == 2 ? "r2-init-started" : "r0-init-started");
  expectResult(c, "the finished init", waitReady(c, c->comm, "init"), ncclSuccess);

  ncclComm_t child = NULL;
  if (me != 0 && !waitStep(c, m, "r0-split-started")) return;
  ncclResult_t r = ncclCommSplit(c->comm, 0, me, &child, NULL);
  if (!expectResult(c, "split with a NULL config of a non-blocking parent", r, ncclInProgress) ||
      child == NULL) {
    return;
  }
  if (me == 0) expectAsync(c, child, "async state of a split waiting for rank 1", ncclInProgress);
  signalStep(m, "r0-split-started");
  expectResult(c, "the finished split", waitReady(c, child, "split"), ncclSuccess);
  checkSum(c, child, "ncclAllReduce on the split child");
  CHECK_OK(c, "ncclCommDestroy child", ncclCommDestroy(child));

  /* Rank 0's operation waits for the others', which come only after rank 0's finalize returned. */
  int x = me + 1;
  if (me == 0) {
    if (!CHECK_OK(c, "ncclAllReduce on a stream",
                  ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c->comm, someStream()))) {
      return;
    }
    expectResult(c, "ncclCommFinalize with an operation outstanding", ncclCommFinalize(c->comm),
                 ncclInProgress);
    expectAsync(c, c->comm, "async state while finalizing", ncclInProgress);
    sleepMs(200);
    expectAsync(c, c->comm, "async state while the others withhold their part", ncclInProgress);
    signalStep(m, "r0-finalize-started");
  } else {
    if (!waitStep(c, m, "r0-finalize-started")) return;
    CHECK_OK(c, "ncclAllReduce", ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c->comm, NULL));
    r = ncclCommFinalize(c->comm);
    if (r != ncclSuccess) expectResult(c, "ncclCommFinalize", r, ncclInProgress);
  }
  expectResult(c, "the finished finalize", waitReady(c, c->comm, "finalize"), ncclSuccess);
  if (x != n * (n + 1) / 2) {
    printf("WRONG the allreduce finalize waited for: %d, want %d\n", x, n * (n + 1) / 2);
    c->wrong++;
  }
  CHECK_OK(c, "ncclCommDestroy", ncclCommDestroy(c->comm));
}

/* Init inside nested groups, as PyTorch and nccl-tests issue it: no call blocks before the
 * outermost ncclGroupEnd (rank 1 starts its init only after rank 0's inner end returned), which
 * returns with the communicator ready. Then a blocking finalize, which waits for an operation. */
static void runGroupInit(Check* c, const ModeArgs* m, ncclUniqueId id) {
  const int me = c->rank;
  if (me == 1 && !waitStep(c, m, "r0-init-issued")) return;
  if (!CHECK_OK(c, "ncclGroupStart", ncclGroupStart()) ||
      !CHECK_OK(c, "ncclGroupStart nested", ncclGroupStart()) ||
      !CHECK_OK(c, "ncclCommInitRank in a group", ncclCommInitRank(&c->comm, c->nranks, id, me)) ||
      !CHECK_OK(c, "ncclGroupEnd nested", ncclGroupEnd())) {
    return;
  }
  signalStep(m, "r0-init-issued");
  if (!CHECK_OK(c, "the outermost ncclGroupEnd", ncclGroupEnd())) return;
  expectAsync(c, c->comm, "async state after ncclGroupEnd", ncclSuccess);
  checkSum(c, c->comm, "ncclAllReduce after init in a group");

  int x = me + 1;
  if (me == 0) {
    if (!CHECK_OK(c, "ncclAllReduce on a stream",
                  ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c->comm, someStream()))) {
      return;
    }
    signalStep(m, "r0-posted");
    const double start = nowMs();
    CHECK_OK(c, "blocking ncclCommFinalize", ncclCommFinalize(c->comm));
    const double took = nowMs() - start;
    if (took < 150.0) {
      printf("WRONG blocking ncclCommFinalize returned after %.0f ms, before rank 1 posted\n",
             took);
      c->wrong++;
    }
  } else {
    if (!waitStep(c, m, "r0-posted")) return;
    sleepMs(300);
    CHECK_OK(c, "ncclAllReduce", ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c->comm, NULL));
    CHECK_OK(c, "ncclCommFinalize", ncclCommFinalize(c->comm));
  }
  if (x != 3) {
    printf("WRONG the allreduce finalize waited for: %d, want 3\n", x);
    c->wrong++;
  }
  CHECK_OK(c, "ncclCommDestroy", ncclCommDestroy(c->comm));
}

/* The daemon's comm.op_timeout_ms fails an allreduce that the last rank withholds; the others
 * expect --want (ncclTimeout or ncclRemoteError, by library and config version) from the call
 * and, for an operation on a stream, from ncclCommGetAsyncError. --config-version 0: no config. */
static void runTimeout(Check* c, const ModeArgs* m, ncclUniqueId id) {
  const int me = c->rank, last = c->nranks - 1;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.version = (unsigned)m->configVersion;
  ncclResult_t r = m->configVersion == 0
                       ? ncclCommInitRank(&c->comm, c->nranks, id, me)
                       : ncclCommInitRankConfig(&c->comm, c->nranks, id, me, &config);
  if (!CHECK_OK(c, "ncclCommInitRank", r)) return;
  if (me == last) {
    char step[64];
    for (int p = 0; p < last; ++p) {
      snprintf(step, sizeof step, "timed-out-%d", p);
      if (!waitStep(c, m, step)) break;
    }
    CHECK_OK(c, "ncclCommAbort", ncclCommAbort(c->comm));
    return;
  }
  float x = 1.0f;
  r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c->comm, NULL);
  if (expectResult(c, "ncclAllReduce withheld by the last rank", r, (ncclResult_t)m->want)) {
    printf("timed out: %d (%s): %s\n", (int)r, ncclGetErrorString(r), ncclGetLastError(c->comm));
    if (strstr(ncclGetLastError(c->comm), "within") == NULL) {
      printf("WRONG the timeout's text names no deadline: '%s'\n", ncclGetLastError(c->comm));
      c->wrong++;
    }
  }
  /* The communicator has failed: an operation on a stream fails too, asynchronously. */
  CHECK_OK(c, "ncclAllReduce on a stream",
           ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c->comm, someStream()));
  ncclResult_t async = ncclSuccess;
  for (double start = nowMs(); async == ncclSuccess && nowMs() - start < STEP_TIMEOUT_MS;
       sleepMs(1)) {
    if (!CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(c->comm, &async))) break;
  }
  expectResult(c, "the async error after the timeout", async, (ncclResult_t)m->want);
  char step[64];
  snprintf(step, sizeof step, "timed-out-%d", me);
  signalStep(m, step);
  CHECK_OK(c, "ncclCommAbort", ncclCommAbort(c->comm));
}

typedef struct {
  ncclComm_t comm;
  double abortStart, abortEnd;
  ncclResult_t result;
} Aborter;

static void* abortLater(void* arg) {
  Aborter* a = (Aborter*)arg;
  sleepMs(500);
  a->abortStart = nowMs();
  a->result = ncclCommAbort(a->comm);
  a->abortEnd = nowMs();
  return NULL;
}

/* Rank 0 waits in a blocking allreduce that rank 1 never posts; a second thread aborts the
 * communicator, as a framework's watchdog does. The abort returns at once and the waiter wakes
 * with an error within 5 s. */
static void runAbortWaiter(Check* c, const ModeArgs* m, ncclUniqueId id) {
  if (!CHECK_OK(c, "ncclCommInitRank", ncclCommInitRank(&c->comm, c->nranks, id, c->rank))) return;
  if (c->rank != 0) {
    waitStep(c, m, "r0-woke");
    CHECK_OK(c, "ncclCommAbort", ncclCommAbort(c->comm));
    return;
  }
  Aborter a = {c->comm, 0, 0, ncclInternalError};
  pthread_t thread;
  if (pthread_create(&thread, NULL, abortLater, &a) != 0) {
    printf("ERROR pthread_create\n");
    c->wrong++;
    return;
  }
  float x = 1.0f;
  const ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c->comm, NULL);
  const double woke = nowMs();
  const char* text = ncclGetLastError(NULL);
  pthread_join(thread, NULL);
  c->comm = NULL; /* freed by the abort */
  signalStep(m, "r0-woke");
  printf("waiter: %d (%s): %s; abort took %.1f ms, the waiter woke %.1f ms after it began\n",
         (int)r, ncclGetErrorString(r), text, a.abortEnd - a.abortStart, woke - a.abortStart);
  CHECK_OK(c, "ncclCommAbort from the second thread", a.result);
  if (r == ncclSuccess || r == ncclInProgress) {
    printf("WRONG the aborted allreduce returned %d\n", (int)r);
    c->wrong++;
  }
  if (a.abortEnd - a.abortStart > 1000.0) {
    printf("WRONG ncclCommAbort blocked for %.0f ms\n", a.abortEnd - a.abortStart);
    c->wrong++;
  }
  if (woke - a.abortStart > 5000.0) {
    printf("WRONG the waiter woke %.0f ms after the abort\n", woke - a.abortStart);
    c->wrong++;
  }
}

/* Allreduces until one fails (the test kills the daemon meanwhile); prints "looping" once and
 * "loop ended: <result>" at the end. */
static void runLoop(Check* c, ncclUniqueId id) {
  if (!CHECK_OK(c, "ncclCommInitRank", ncclCommInitRank(&c->comm, c->nranks, id, c->rank))) return;
  static float buf[4096];
  ncclResult_t r = ncclSuccess;
  int announced = 0;
  for (double start = nowMs(); r == ncclSuccess && nowMs() - start < 120000.0;) {
    r = ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, c->comm, NULL);
    if (r == ncclSuccess && !announced) {
      printf("looping\n");
      announced = 1;
    }
  }
  printf("loop ended: %d (%s): %s\n", (int)r, ncclGetErrorString(r), ncclGetLastError(c->comm));
  if (r == ncclSuccess || r == ncclInProgress) c->wrong++;
  ncclResult_t async = ncclSuccess;
  CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(c->comm, &async));
  printf("async error: %d (%s)\n", (int)async, ncclGetErrorString(async));
  CHECK_OK(c, "ncclCommAbort", ncclCommAbort(c->comm));
}

/* ---- disagree: ranks that issue different operations as op k ---- */

/* How long after its call a rank may learn of the disagreement: the daemon compares descriptors
 * once every rank posted, so this covers the other ranks' start as well. */
#define DISAGREE_BOUND_MS 10000
/* How much later than ranks 0 and 1 the others issue the disagreeing operation. */
#define DISAGREE_LATE_MS 300
/* The even ranks' allreduce count: odd ranks of --by count issue one more. */
#define DISAGREE_COUNT 1024

/* --by FIELD or FIELD+stream: what odd ranks change, and whether the ranks issue on a stream. */
static int byField(const ModeArgs* m, const char* field) {
  const size_t n = strlen(field);
  return strncmp(m->by, field, n) == 0 && (m->by[n] == '\0' || m->by[n] == '+');
}

/* Odd ranks change one thing of the even ranks' ncclAllReduce(DISAGREE_COUNT, int32, sum):
 * --by count (one more element), op (ncclBroadcast from rank 0) or dtype (float32). */
static ncclResult_t issueDisagreeing(Check* c, const ModeArgs* m, void* buf, Stream stream) {
  const int odd = c->rank % 2 == 1;
  size_t count = DISAGREE_COUNT;
  ncclDataType_t dtype = ncclInt32;
  if (odd && byField(m, "count")) count += 1;
  if (odd && byField(m, "dtype")) dtype = ncclFloat32;
  if (odd && byField(m, "op")) {
    return ncclBroadcast(buf, buf, count, dtype, 0, c->comm, stream);
  }
  return ncclAllReduce(buf, buf, count, dtype, ncclSum, c->comm, stream);
}

/* The text a disagreement must carry: hc's, naming the mismatch and what the odd ranks posted
 * (the one more element, the broadcast, or the float32), so a reader can tell who differed. */
static void expectDisagreementText(Check* c, const ModeArgs* m, const char* what) {
  char odd[32];
  snprintf(odd, sizeof odd, "count=%d", DISAGREE_COUNT + 1);
  const char* token = byField(m, "op") ? "broadcast" : byField(m, "dtype") ? "float32" : odd;
  const char* text = ncclGetLastError(c->comm);
  printf("disagreement text: %s\n", text);
  if (strstr(text, "mismatch") == NULL || strstr(text, token) == NULL) {
    printf("WRONG %s: ncclGetLastError does not name the mismatch and '%s': '%s'\n", what, token,
           text);
    c->wrong++;
  }
}

/* On the NULL stream the call itself fails. On a stream handle (FIELD+stream) the call may
 * return once submitted, and ncclCommGetAsyncError then reports the failure. */
static void checkDisagreement(Check* c, const ModeArgs* m) {
  static int32_t buf[DISAGREE_COUNT + 1];
  for (int i = 0; i <= DISAGREE_COUNT; ++i) buf[i] = c->rank + 1;
  const Stream stream = strstr(m->by, "+stream") != NULL ? someStream() : NULL;
  /* Ranks 2 and up come later, so where they share a daemon (the test's paired placement) the
   * other daemon has found its own pair's disagreement first: one order, not a race. */
  if (c->rank >= 2) sleepMs(DISAGREE_LATE_MS);
  const double start = nowMs();
  ncclResult_t r = issueDisagreeing(c, m, buf, stream);
  if (r == ncclSuccess && stream != NULL) {
    ncclResult_t async = ncclSuccess;
    while (async == ncclSuccess && nowMs() - start < STEP_TIMEOUT_MS) {
      if (!CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(c->comm, &async))) return;
      if (async == ncclSuccess) sleepMs(1);
    }
    r = async;
    printf("async error of the disagreeing operation: %d (%s)\n", (int)r, ncclGetErrorString(r));
  }
  const double took = nowMs() - start;
  /* +remote (the test's paired placement): ranks 2 and 3 share a daemon that learns of the
   * disagreement from the other one: they get ncclRemoteError, with words that still name the
   * mismatch (the other daemon's notice carries them). */
  const int remote = c->rank >= 2 && strstr(m->by, "+remote") != NULL;
  if (expectResult(c, "the disagreeing operation", r,
                   remote ? ncclRemoteError : ncclInvalidArgument)) {
    expectDisagreementText(c, m, stream == NULL ? "the call's error" : "the async error");
  }
  if (took > DISAGREE_BOUND_MS) {
    printf("WRONG the disagreement took %.0f ms to reach rank %d\n", took, c->rank);
    c->wrong++;
  }
  /* The communicator has failed: the next operation fails too, and is never a success. */
  int x = 1;
  r = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c->comm, NULL);
  printf("the operation after it: %d (%s): %s\n", (int)r, ncclGetErrorString(r),
         ncclGetLastError(c->comm));
  if (r == ncclSuccess || r == ncclInProgress) {
    printf("WRONG an operation after the disagreement returned %d\n", (int)r);
    c->wrong++;
  }
}

/* Rank 0 makes a fresh id and leaves it in the sync folder as hex; the others read it. */
static int shareFreshId(Check* c, const ModeArgs* m, ncclUniqueId* id) {
  char path[4096], tmp[4200];
  stepPath(m, "fresh-id", path, sizeof path);
  if (c->rank == 0) {
    if (!CHECK_OK(c, "ncclGetUniqueId", ncclGetUniqueId(id))) return 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "w");
    if (f == NULL) return 0;
    for (size_t i = 0; i < sizeof id->internal; ++i) {
      fprintf(f, "%02x", (unsigned char)id->internal[i]);
    }
    fclose(f);
    return rename(tmp, path) == 0; /* whole, or not there at all */
  }
  if (!waitStep(c, m, "fresh-id")) return 0;
  FILE* f = fopen(path, "r");
  unsigned v = 0;
  size_t i = 0;
  for (; f != NULL && i < sizeof id->internal && fscanf(f, "%2x", &v) == 1; ++i) {
    id->internal[i] = (char)v;
  }
  if (f != NULL) fclose(f);
  if (i == sizeof id->internal) return 1;
  printf("ERROR rank %d: cannot read the fresh id at %s\n", c->rank, path);
  c->wrong++;
  return 0;
}

/* A job whose ranks disagree on one operation (--by count, op or dtype, each with an optional
 * +stream; even ranks libnccl, odd ranks librccl in the mixed tests): every rank gets
 * ncclInvalidArgument naming the mismatch within DISAGREE_BOUND_MS, and the next operation
 * fails. Then the daemons still serve a fresh communicator of the same ranks. */
static void runDisagree(Check* c, const ModeArgs* m, ncclUniqueId id) {
  if (!CHECK_OK(c, "ncclCommInitRank", ncclCommInitRank(&c->comm, c->nranks, id, c->rank))) return;
  checkSum(c, c->comm, "ncclAllReduce before the disagreement");
  checkDisagreement(c, m);
  CHECK_OK(c, "ncclCommAbort of the failed communicator", ncclCommAbort(c->comm));
  c->comm = NULL;

  ncclUniqueId fresh;
  if (!shareFreshId(c, m, &fresh)) return;
  if (!CHECK_OK(c, "ncclCommInitRank of a fresh communicator",
                ncclCommInitRank(&c->comm, c->nranks, fresh, c->rank))) {
    return;
  }
  checkSum(c, c->comm, "ncclAllReduce on the fresh communicator");
  CHECK_OK(c, "ncclCommDestroy of the fresh communicator", ncclCommDestroy(c->comm));
}

int runMode(Check* c, const ModeArgs* m, ncclUniqueId id) {
  if (strcmp(m->mode, "nonblocking") == 0) {
    runNonBlocking(c, m, id);
  } else if (strcmp(m->mode, "group-init") == 0) {
    runGroupInit(c, m, id);
  } else if (strcmp(m->mode, "timeout") == 0) {
    runTimeout(c, m, id);
  } else if (strcmp(m->mode, "abort-waiter") == 0) {
    runAbortWaiter(c, m, id);
  } else if (strcmp(m->mode, "loop") == 0) {
    runLoop(c, id);
  } else if (strcmp(m->mode, "init-all") == 0) {
    runInitAll(c);
  } else if (strcmp(m->mode, "finalize-abort") == 0) {
    runFinalizeAbort(c);
  } else if (strcmp(m->mode, "disagree") == 0) {
    runDisagree(c, m, id);
  } else if (strcmp(m->mode, "sim") == 0) {
    runSim(c, m, id);
  } else {
    fprintf(stderr, "unknown --mode %s\n", m->mode);
    return 2;
  }
  printf("#wrong %d\n", c->wrong);
  return c->wrong == 0 ? 0 : 1;
}
