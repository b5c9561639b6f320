// MPI_Allreduce of float32 sums, timed like nccl-tests: per size, one checked call, `warmup`
// calls, then `iters` calls back to back; time = the slowest rank's elapsed / iters.
// Usage: mpi_allreduce SIZE:WARMUP:ITERS...   (SIZE in bytes, a multiple of 4)
// Prints "SIZE TIME_US" per size from rank 0; exits non-zero on a wrong result.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct Spec {
  size_t bytes;
  int warmup;
  int iters;
};

static int parseSpec(const char* text, struct Spec* out) {
  return sscanf(text, "%zu:%d:%d", &out->bytes, &out->warmup, &out->iters) == 3 &&
         out->bytes >= 4 && out->bytes % 4 == 0 && out->warmup >= 0 && out->iters > 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  struct Spec* specs = calloc((size_t)argc, sizeof(*specs));
  size_t maxBytes = 0;
  for (int i = 1; i < argc; ++i) {
    if (!parseSpec(argv[i], &specs[i - 1])) {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: bad SIZE:WARMUP:ITERS '%s'\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (specs[i - 1].bytes > maxBytes) maxBytes = specs[i - 1].bytes;
  }
  // Allocated and touched once, as hc-perf's ranks do: first touch is not what is measured.
  float* send = malloc(maxBytes);
  float* recv = malloc(maxBytes);
  if (send == NULL || recv == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(recv, 0, maxBytes);
  for (size_t i = 0; i < maxBytes / 4; ++i) send[i] = (float)(rank + 1);
  const float expected = (float)nranks * (nranks + 1) / 2;

  if (rank == 0) printf("# mpi_allreduce float sum np %d\n# size_bytes time_us\n", nranks);
  for (int s = 0; s + 1 < argc; ++s) {
    const int count = (int)(specs[s].bytes / 4);
    // Every rank contributes rank+1, so every element must be n(n+1)/2 on every rank.
    for (int i = 0; i < count; ++i) recv[i] = -1.0f;
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0;
    for (int i = 0; i < count; ++i) wrong += recv[i] != expected;
    long wrongAll = 0;
    MPI_Allreduce(&wrong, &wrongAll, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrongAll != 0) {
      if (rank == 0) {
        fprintf(stderr, "mpi_allreduce: %zu B: %ld wrong elements\n", specs[s].bytes, wrongAll);
      }
      MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (int i = 0; i < specs[s].warmup; ++i) {
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < specs[s].iters; ++i) {
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double us = (MPI_Wtime() - t0) * 1e6 / specs[s].iters;
    double slowest = 0;
    MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("%zu %.3f\n", specs[s].bytes, slowest);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  free(specs);
  MPI_Finalize();
  return 0;
}
