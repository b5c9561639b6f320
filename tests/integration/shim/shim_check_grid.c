/* The collective grid of hc_shim_check: every collective and ncclBcast x dtypes x ops x counts
 * 0, 1, 7 and 1 Mi + 3, in place and out of place. Small counts use heap memory (the shim stages
 * it), the large count ncclMemAlloc memory (zero copy). Inputs are small integers, so every
 * reduction is exact in any order and the expected values are computed here independently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/shim/shim_check.h"

#define BIG_COUNT ((size_t)(1u << 20) + 3)
#define SENTINEL 111.0

static const ncclDataType_t kTypes[] = {ncclUint8, ncclInt32, ncclInt64, ncclFloat32, ncclFloat64};
static const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static const size_t kCounts[] = {0, 1, 7, BIG_COUNT};
#define N_TYPES (sizeof(kTypes) / sizeof(kTypes[0]))
#define N_OPS (sizeof(kOps) / sizeof(kOps[0]))

/* What one case expects: enough to compute element i of the receive buffer. */
typedef struct {
  int nranks, rank, root;
  ncclRedOp_t op;
  ncclDataType_t type;
  size_t count, offset;
} Want;

/* Rank r's input to reductions, its element i of any other collective, and its element i of
 * the block it sends to peer "to" in an all-to-all. */
static double value(int r, size_t i) { return (double)(1 + (r + i) % 3); }
static double tag(int r, size_t i) { return (double)((r * 7 + i) % 61); }
static double tagTo(int from, int to, size_t i) { return (double)((from * 13 + to * 5 + i) % 61); }

static double reduced(const Want* w, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < w->nranks; ++r) {
    const double x = value(r, i);
    switch (w->op) {
      case ncclProd:
        acc *= x;
        break;
      case ncclMax:
        acc = x > acc ? x : acc;
        break;
      case ncclMin:
        acc = x < acc ? x : acc;
        break;
      default:
        acc += x;
        break;
    }
  }
  if (w->op != ncclAvg) return acc;
  /* NCCL's average: floats multiply by 1/n (exact for the rank counts run), integers divide. */
  if (w->type == ncclFloat32 || w->type == ncclFloat64) return acc * (1.0 / w->nranks);
  return (double)((long long)acc / w->nranks);
}

static double wantReduced(size_t i, const void* ctx) {
  const Want* w = (const Want*)ctx;
  return reduced(w, w->offset + i);
}
static double wantRootTag(size_t i, const void* ctx) { return tag(((const Want*)ctx)->root, i); }
static double wantOwnTag(size_t i, const void* ctx) { return tag(((const Want*)ctx)->rank, i); }
static double wantGathered(size_t i, const void* ctx) {
  const Want* w = (const Want*)ctx;
  return tag((int)(i / w->count), i % w->count);
}
static double wantAllToAll(size_t i, const void* ctx) {
  const Want* w = (const Want*)ctx;
  return tagTo((int)(i / w->count), w->rank, i % w->count);
}

typedef struct {
  char* send;
  char* recv;
} Buffers;

static void fill(void* buf, ncclDataType_t t, size_t count, double (*f)(int, size_t), int r) {
  for (size_t i = 0; i < count; ++i) putValue(buf, t, i, f(r, i));
}
static void fillConst(void* buf, ncclDataType_t t, size_t count, double v) {
  for (size_t i = 0; i < count; ++i) putValue(buf, t, i, v);
}

enum ReduceKind { kAllReduce, kReduce, kReduceScatter };
static const char* const kReduceNames[] = {"ncclAllReduce", "ncclReduce", "ncclReduceScatter"};

static void reduceCase(Check* c, Buffers b, enum ReduceKind kind, Want w, int inPlace) {
  const size_t es = dtypeSize(w.type), n = (size_t)c->nranks;
  const size_t inCount = kind == kReduceScatter ? n * w.count : w.count;
  char what[160];
  snprintf(what, sizeof(what), "%s %s dtype=%d op=%d count=%zu", kReduceNames[kind],
           inPlace ? "in-place" : "out-of-place", (int)w.type, (int)w.op, w.count);
  fill(b.send, w.type, inCount, value, c->rank);
  char* recv = b.recv;
  if (inPlace) {
    recv = kind == kReduceScatter ? b.send + (size_t)c->rank * w.count * es : b.send;
  } else {
    fillConst(recv, w.type, w.count, SENTINEL);
  }
  ncclResult_t r = ncclSuccess;
  if (kind == kAllReduce) r = ncclAllReduce(b.send, recv, w.count, w.type, w.op, c->comm, NULL);
  if (kind == kReduce) {
    r = ncclReduce(b.send, recv, w.count, w.type, w.op, w.root, c->comm, NULL);
  }
  if (kind == kReduceScatter) {
    r = ncclReduceScatter(b.send, recv, w.count, w.type, w.op, c->comm, NULL);
  }
  if (!CHECK_OK(c, what, r)) return;
  w.offset = kind == kReduceScatter ? (size_t)c->rank * w.count : 0;
  if (kind != kReduce || c->rank == w.root) {
    expectValues(c, what, recv, w.type, w.count, wantReduced, &w);
  }
}

/* Broadcast, ncclBcast, all-gather, all-to-all, gather and scatter for one dtype and count. */
static void dataCases(Check* c, Buffers b, Want w, int inPlace) {
  const size_t es = dtypeSize(w.type), n = (size_t)c->nranks, count = w.count;
  const int me = c->rank, root = w.root;
  char* const mine = b.recv + (size_t)me * count * es; /* this rank's block of recv */
  char what[160];
#define WHAT(name)                                               \
  snprintf(what, sizeof(what), "%s %s dtype=%d count=%zu", name, \
           inPlace ? "in-place" : "out-of-place", (int)w.type, count)

  WHAT(inPlace ? "ncclBcast" : "ncclBroadcast");
  fill(inPlace ? b.recv : b.send, w.type, count, tag, me);
  if (!inPlace && me != root) fillConst(b.recv, w.type, count, SENTINEL);
  if (CHECK_OK(c, what,
               inPlace ? ncclBcast(b.recv, count, w.type, root, c->comm, NULL)
                       : ncclBroadcast(b.send, b.recv, count, w.type, root, c->comm, NULL))) {
    expectValues(c, what, b.recv, w.type, count, wantRootTag, &w);
  }

  WHAT("ncclAllGather");
  fillConst(b.recv, w.type, n * count, SENTINEL);
  fill(inPlace ? mine : b.send, w.type, count, tag, me);
  if (CHECK_OK(c, what,
               ncclAllGather(inPlace ? mine : b.send, b.recv, count, w.type, c->comm, NULL))) {
    expectValues(c, what, b.recv, w.type, n * count, wantGathered, &w);
  }

  if (!inPlace) { /* all-to-all is never in place */
    WHAT("ncclAlltoAll");
    for (size_t p = 0; p < n; ++p) {
      for (size_t i = 0; i < count; ++i)
        putValue(b.send, w.type, p * count + i, tagTo(me, (int)p, i));
    }
    fillConst(b.recv, w.type, n * count, SENTINEL);
    if (CHECK_OK(c, what, ncclAlltoAll(b.send, b.recv, count, w.type, c->comm, NULL))) {
      expectValues(c, what, b.recv, w.type, n * count, wantAllToAll, &w);
    }
  }

  WHAT("ncclGather");
  fillConst(b.recv, w.type, n * count, SENTINEL);
  fill(inPlace ? mine : b.send, w.type, count, tag, me);
  if (CHECK_OK(c, what,
               ncclGather(inPlace ? mine : b.send, b.recv, count, w.type, root, c->comm, NULL)) &&
      me == root) {
    expectValues(c, what, b.recv, w.type, n * count, wantGathered, &w);
  }

  WHAT("ncclScatter");
  for (size_t p = 0; p < n; ++p) fill(b.send + p * count * es, w.type, count, tag, (int)p);
  char* recv = inPlace ? b.send + (size_t)me * count * es : b.recv;
  if (!inPlace) fillConst(recv, w.type, count, SENTINEL);
  if (CHECK_OK(c, what, ncclScatter(b.send, recv, count, w.type, root, c->comm, NULL))) {
    expectValues(c, what, recv, w.type, count, wantOwnTag, &w);
  }
#undef WHAT
}

void runCollectiveGrid(Check* c, int quick) {
  const size_t n = (size_t)c->nranks;
  Buffers heap, big;
  heap.send = malloc(n * 7 * 8);
  heap.recv = malloc(n * 7 * 8);
  if (!CHECK_OK(c, "ncclMemAlloc", ncclMemAlloc((void**)&big.send, n * BIG_COUNT * 8)) ||
      !CHECK_OK(c, "ncclMemAlloc", ncclMemAlloc((void**)&big.recv, n * BIG_COUNT * 8))) {
    return;
  }
  for (size_t k = 0; k < sizeof(kCounts) / sizeof(kCounts[0]); ++k) {
    const size_t count = kCounts[k];
    const int large = count == BIG_COUNT;
    if (quick && large) continue;
    for (size_t d = 0; d < N_TYPES; ++d) {
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        Want w = {c->nranks, c->rank, (int)((count + 1) % n), ncclSum, kTypes[d], count, 0};
        dataCases(c, large ? big : heap, w, inPlace);
        for (size_t o = 0; o < N_OPS; ++o) {
          /* The large count runs sum and one other op per dtype: every op, not every pair. */
          if (large && o != 0 && o != 1 + d % (N_OPS - 1)) continue;
          w.op = kOps[o];
          for (int kind = kAllReduce; kind <= kReduceScatter; ++kind) {
            reduceCase(c, large ? big : heap, (enum ReduceKind)kind, w, inPlace);
          }
        }
      }
    }
  }
  CHECK_OK(c, "ncclMemFree", ncclMemFree(big.send));
  CHECK_OK(c, "ncclMemFree", ncclMemFree(big.recv));
  free(heap.send);
  free(heap.recv);
}
