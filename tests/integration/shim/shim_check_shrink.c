/* ncclCommShrink and ncclCommRevoke through the shim: refused arguments, the last rank left out
 * (it does not call), the child's allreduce, then a revoked child whose finalize is refused. */
#include <stdio.h>

#include "tests/integration/shim/shim_check.h"

void runShrink(Check* c) {
  const int n = c->nranks, me = c->rank;
  ncclComm_t child = NULL;
  int self = me, last = n - 1;
  expectResult(c, "ncclCommShrink excluding itself",
               ncclCommShrink(c->comm, &self, 1, &child, NULL, NCCL_SHRINK_DEFAULT),
               ncclInvalidArgument);
  expectResult(c, "ncclCommShrink with unknown flags",
               ncclCommShrink(c->comm, NULL, 0, &child, NULL, 7), ncclInvalidArgument);
  if (child != NULL) {
    printf("WRONG a refused ncclCommShrink gave a communicator\n");
    c->wrong++;
  }
  if (n < 2 || me == last) return; /* an excluded rank does not call */
  if (!CHECK_OK(c, "ncclCommShrink",
                ncclCommShrink(c->comm, &last, 1, &child, NULL, NCCL_SHRINK_DEFAULT))) {
    return;
  }
  int size = 0, rank = -1, sum = me + 1;
  CHECK_OK(c, "ncclCommCount shrunk", ncclCommCount(child, &size));
  CHECK_OK(c, "ncclCommUserRank shrunk", ncclCommUserRank(child, &rank));
  if (size != n - 1 || rank != me) {
    printf("WRONG shrink: rank %d of %d, want %d of %d\n", rank, size, me, n - 1);
    c->wrong++;
  }
  if (CHECK_OK(c, "ncclAllReduce shrunk",
               ncclAllReduce(&sum, &sum, 1, ncclInt32, ncclSum, child, NULL)) &&
      sum != (n - 1) * n / 2) {
    printf("WRONG allreduce on the shrunk child: %d, want %d\n", sum, (n - 1) * n / 2);
    c->wrong++;
  }
  CHECK_OK(c, "ncclCommRevoke", ncclCommRevoke(child, 0));
  expectResult(c, "ncclCommFinalize after revoke", ncclCommFinalize(child), ncclInvalidUsage);
  CHECK_OK(c, "ncclCommDestroy revoked", ncclCommDestroy(child));
}
