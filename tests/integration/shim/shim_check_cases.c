/* hc_shim_check's other cases: groups with send/recv posted in shuffled order (nested), RCCL's
 * all-to-all-v, a pre-multiplied sum, split (NOCOLOR included), registration and bad arguments. */
#include <stdio.h>
#include <string.h>

#include "tests/integration/shim/shim_check.h"

static double fromPeer(int from, size_t i) { return (double)((from * 11 + i) % 97); }

static double wantFromPrev(size_t i, const void* ctx) { return fromPeer(*(const int*)ctx, i); }

void runGroupsAndP2p(Check* c) {
  const int n = c->nranks, me = c->rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const int far = (me + 2) % n, farPrev = (me + n - 2) % n;
  float out[7], in[7], out2[7], in2[7];
  for (size_t i = 0; i < 7; ++i) {
    out[i] = (float)fromPeer(me, i);
    out2[i] = (float)fromPeer(me, i);
    in[i] = in2[i] = -1.0f;
  }
  /* Receives before sends, the second ring in a nested group: only the outermost end submits. */
  int ok = CHECK_OK(c, "ncclGroupStart", ncclGroupStart());
  ok = ok && CHECK_OK(c, "ncclRecv", ncclRecv(in, 7, ncclFloat32, prev, c->comm, NULL));
  ok = ok && CHECK_OK(c, "ncclGroupStart nested", ncclGroupStart());
  ok = ok && CHECK_OK(c, "ncclRecv far", ncclRecv(in2, 7, ncclFloat32, farPrev, c->comm, NULL));
  ok = ok && CHECK_OK(c, "ncclSend far", ncclSend(out2, 7, ncclFloat32, far, c->comm, NULL));
  ok = ok && CHECK_OK(c, "ncclGroupEnd nested", ncclGroupEnd());
  ok = ok && CHECK_OK(c, "ncclSend", ncclSend(out, 7, ncclFloat32, next, c->comm, NULL));
  if (!CHECK_OK(c, "ncclGroupEnd", ncclGroupEnd()) || !ok) return;
  expectValues(c, "grouped ncclRecv from prev", in, ncclFloat32, 7, wantFromPrev, &prev);
  expectValues(c, "grouped ncclRecv from prev-2", in2, ncclFloat32, 7, wantFromPrev, &farPrev);

  /* RCCL's ncclAllToAllv: rank r sends 1 + (r + 2p) % 3 elements to p, packed. */
  size_t sc[64], sd[64], rc[64], rd[64];
  float send[256], recv[256];
  size_t soff = 0, roff = 0;
  for (int p = 0; p < n && n <= 64; ++p) {
    sc[p] = 1 + (size_t)(me + 2 * p) % 3;
    rc[p] = 1 + (size_t)(p + 2 * me) % 3;
    sd[p] = soff;
    rd[p] = roff;
    for (size_t i = 0; i < sc[p]; ++i) send[soff + i] = (float)(me * 100 + p * 10 + (int)i);
    soff += sc[p];
    roff += rc[p];
  }
  if (CHECK_OK(c, "ncclAllToAllv",
               ncclAllToAllv(send, sc, sd, recv, rc, rd, ncclFloat32, c->comm, NULL))) {
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < rc[p]; ++i) {
        if (recv[rd[p] + i] != (float)(p * 100 + me * 10 + (int)i)) {
          printf("WRONG ncclAllToAllv: from %d element %zu is %g\n", p, i, recv[rd[p] + i]);
          c->wrong++;
          break;
        }
      }
    }
  }

  /* A pre-multiplied sum with a host-immediate scalar: 2 * sum of (rank + 1). */
  ncclRedOp_t op;
  float scalar = 2.0f, x = (float)(me + 1);
  if (CHECK_OK(
          c, "ncclRedOpCreatePreMulSum",
          ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, c->comm))) {
    if (CHECK_OK(c, "ncclAllReduce premulsum",
                 ncclAllReduce(&x, &x, 1, ncclFloat32, op, c->comm, NULL)) &&
        x != (float)(n * (n + 1))) {
      printf("WRONG premulsum allreduce: %g, want %d\n", x, n * (n + 1));
      c->wrong++;
    }
    CHECK_OK(c, "ncclRedOpDestroy", ncclRedOpDestroy(op, c->comm));
  }
}

void runSplit(Check* c) {
  const int n = c->nranks, me = c->rank;
  /* Colors by parity, keys reversed: the child's ranks run in the opposite order. */
  ncclComm_t child = NULL;
  if (!CHECK_OK(c, "ncclCommSplit", ncclCommSplit(c->comm, me % 2, n - me, &child, NULL))) return;
  int size = 0, rank = -1, want = 0, wantRank = 0, sum = me + 1, wantSum = 0;
  for (int r = 0; r < n; ++r) {
    if (r % 2 != me % 2) continue;
    ++want;
    wantSum += r + 1;
    if (r > me) ++wantRank;
  }
  CHECK_OK(c, "ncclCommCount child", ncclCommCount(child, &size));
  CHECK_OK(c, "ncclCommUserRank child", ncclCommUserRank(child, &rank));
  if (size != want || rank != wantRank) {
    printf("WRONG split: rank %d of %d, want %d of %d\n", rank, size, wantRank, want);
    c->wrong++;
  }
  if (CHECK_OK(c, "ncclAllReduce child",
               ncclAllReduce(&sum, &sum, 1, ncclInt32, ncclSum, child, NULL)) &&
      sum != wantSum) {
    printf("WRONG allreduce on the split child: %d, want %d\n", sum, wantSum);
    c->wrong++;
  }
  CHECK_OK(c, "ncclCommDestroy child", ncclCommDestroy(child));

  /* Rank 0 opts out with NCCL_SPLIT_NOCOLOR and gets NULL; the others form one child. */
  ncclComm_t rest = (ncclComm_t)c; /* any non-NULL value: the split must overwrite it */
  if (!CHECK_OK(c, "ncclCommSplit NOCOLOR",
                ncclCommSplit(c->comm, me == 0 ? NCCL_SPLIT_NOCOLOR : 0, me, &rest, NULL))) {
    return;
  }
  if ((me == 0) != (rest == NULL)) {
    printf("WRONG split with NCCL_SPLIT_NOCOLOR: comm %p on rank %d\n", (void*)rest, me);
    c->wrong++;
    return;
  }
  if (rest != NULL) {
    CHECK_OK(c, "ncclCommCount rest", ncclCommCount(rest, &size));
    if (size != n - 1) {
      printf("WRONG NOCOLOR split child has %d ranks, want %d\n", size, n - 1);
      c->wrong++;
    }
    CHECK_OK(c, "ncclCommDestroy rest", ncclCommDestroy(rest));
  }
}

/* Registration: ncclMemAlloc memory (device memory where a GPU runtime is loaded, else the
 * daemon's segment) and plain memory, used by an operation while registered, then deregistered
 * once; a second deregistration and made-up handles are refused. */
static void runRegistration(Check* c) {
  void* allocated = NULL;
  float plain[5], sums[5];
  void* allocHandle = NULL;
  void* plainHandle = NULL;
  if (CHECK_OK(c, "ncclMemAlloc", ncclMemAlloc(&allocated, 4096))) {
    CHECK_OK(c, "ncclCommRegister of ncclMemAlloc memory",
             ncclCommRegister(c->comm, allocated, 4096, &allocHandle));
    CHECK_OK(c, "pncclCommRegister of plain memory",
             pncclCommRegister(c->comm, plain, sizeof plain, &plainHandle));
    for (int i = 0; i < 5; ++i) plain[i] = (float)(c->rank + i);
    if (CHECK_OK(c, "ncclAllReduce from a registered buffer",
                 ncclAllReduce(plain, sums, 5, ncclFloat32, ncclSum, c->comm, NULL))) {
      for (int i = 0; i < 5; ++i) {
        const float want = (float)(c->nranks * (c->nranks - 1) / 2 + c->nranks * i);
        if (sums[i] != want) {
          printf("WRONG allreduce from a registered buffer: element %d is %g, not %g\n", i, sums[i],
                 want);
          c->wrong++;
          break;
        }
      }
    }
    CHECK_OK(c, "ncclCommDeregister", ncclCommDeregister(c->comm, allocHandle));
    CHECK_OK(c, "pncclCommDeregister", pncclCommDeregister(c->comm, plainHandle));
    expectResult(c, "ncclCommDeregister twice", ncclCommDeregister(c->comm, allocHandle),
                 ncclInvalidArgument);
    CHECK_OK(c, "ncclMemFree", ncclMemFree(allocated));
  }
  expectResult(c, "ncclCommDeregister of a made-up handle", ncclCommDeregister(c->comm, sums),
               ncclInvalidArgument);
  expectResult(c, "ncclCommRegister of NULL", ncclCommRegister(c->comm, NULL, 4, &plainHandle),
               ncclInvalidArgument);
  expectResult(c, "ncclCommRegister on a NULL comm", ncclCommRegister(NULL, plain, 4, &plainHandle),
               ncclInvalidArgument);
}

void runBadArguments(Check* c) {
  int v = 0, count = 0, rank = -1;
  float x = 1.0f;
  runRegistration(c);
  CHECK_OK(c, "ncclGetVersion", ncclGetVersion(&v));
  if (v != NCCL_VERSION_CODE) {
    printf("WRONG ncclGetVersion %d, header says %d\n", v, NCCL_VERSION_CODE);
    c->wrong++;
  }
  CHECK_OK(c, "ncclCommCount", ncclCommCount(c->comm, &count));
  CHECK_OK(c, "ncclCommUserRank", ncclCommUserRank(c->comm, &rank));
  if (count != c->nranks || rank != c->rank) {
    printf("WRONG ncclCommCount/UserRank %d/%d\n", count, rank);
    c->wrong++;
  }
  ncclResult_t async = ncclInternalError;
  CHECK_OK(c, "ncclCommGetAsyncError", ncclCommGetAsyncError(c->comm, &async));
  expectResult(c, "the async error", async, ncclSuccess);

  expectResult(c, "ncclAllReduce with dtype 99",
               ncclAllReduce(&x, &x, 1, (ncclDataType_t)99, ncclSum, c->comm, NULL),
               ncclInvalidArgument);
  expectResult(c, "ncclAllReduce on a NULL comm",
               ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument);
  expectResult(c, "ncclSend to peer nranks", ncclSend(&x, 1, ncclFloat32, c->nranks, c->comm, NULL),
               ncclInvalidArgument);
  expectResult(c, "ncclRecv from peer -1", ncclRecv(&x, 1, ncclFloat32, -1, c->comm, NULL),
               ncclInvalidArgument);
  expectResult(c, "ncclGroupEnd without ncclGroupStart", ncclGroupEnd(), ncclInvalidUsage);
  expectResult(c, "ncclCommInitAll with comm NULL", ncclCommInitAll(NULL, 1, NULL),
               ncclInvalidArgument);
  expectResult(c, "ncclCommSuspend (not supported yet)", ncclCommSuspend(c->comm, 0),
               ncclInvalidUsage);
  if (strstr(ncclGetLastError(c->comm), "ncclCommSuspend") == NULL) {
    printf("WRONG ncclGetLastError after ncclCommSuspend: '%s'\n", ncclGetLastError(c->comm));
    c->wrong++;
  }
  expectResult(c, "pncclCommSuspend (the profiling twin)", pncclCommSuspend(c->comm, 0),
               ncclInvalidUsage);
  /* The communicator still works after the failed calls. */
  x = (float)c->rank;
  if (CHECK_OK(c, "ncclAllReduce after bad arguments",
               ncclAllReduce(&x, &x, 1, ncclFloat32, ncclMax, c->comm, NULL)) &&
      x != (float)(c->nranks - 1)) {
    printf("WRONG allreduce after bad arguments: %g\n", x);
    c->wrong++;
  }
}
