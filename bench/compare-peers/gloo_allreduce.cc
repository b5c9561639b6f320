// gloo::allreduce (ring) of float32 sums over Gloo's TCP transport on 127.0.0.1, one process
// per rank, rendezvous through a FileStore. Timed like mpi_allreduce.c: per size, one checked
// call, `warmup` calls, then `iters` calls back to back; time = the slowest rank's elapsed / iters.
// Usage: gloo_allreduce RANK NRANKS STORE_DIR SIZE:WARMUP:ITERS...
// Rank 0 prints "SIZE TIME_US" per size; exits non-zero on a wrong result or a Gloo error.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Spec {
  size_t bytes;
  int warmup;
  int iters;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

void allreduce(const std::shared_ptr<gloo::Context>& ctx, const float* send, float* recv,
               size_t count) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setInput(const_cast<float*>(send), count);
  opts.setOutput(recv, count);
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

// The largest of every rank's value, on every rank.
template <typename T>
T maxOverRanks(const std::shared_ptr<gloo::Context>& ctx, T value) {
  T out = value;
  gloo::AllreduceOptions opts(ctx);
  opts.setInput(&value, 1);
  opts.setOutput(&out, 1);
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::max<T>));
  gloo::allreduce(opts);
  return out;
}

int run(int rank, int nranks, const std::string& storeDir, const std::vector<Spec>& specs) {
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(storeDir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
  ctx->setTimeout(std::chrono::seconds(300));  // np 4 at 256 MiB takes about a second per call
  ctx->connectFullMesh(store, device);

  size_t maxBytes = 0;
  for (const Spec& s : specs) maxBytes = std::max(maxBytes, s.bytes);
  // Allocated and touched once, as hc-perf's ranks do: first touch is not what is measured.
  std::vector<float> send(maxBytes / 4, static_cast<float>(rank + 1));
  std::vector<float> recv(maxBytes / 4, 0.0f);
  const float expected = static_cast<float>(nranks) * (nranks + 1) / 2;

  if (rank == 0) {
    std::printf("# gloo_allreduce ring float sum np %d\n# size_bytes time_us\n", nranks);
  }
  for (const Spec& s : specs) {
    const size_t count = s.bytes / 4;
    // Every rank contributes rank+1, so every element must be n(n+1)/2 on every rank.
    std::fill_n(recv.begin(), count, -1.0f);
    allreduce(ctx, send.data(), recv.data(), count);
    int64_t wrong =
        std::count_if(recv.begin(), recv.begin() + count, [&](float v) { return v != expected; });
    if (maxOverRanks<int64_t>(ctx, wrong) != 0) {
      std::fprintf(stderr, "gloo_allreduce: rank %d, %zu B: %lld wrong elements\n", rank, s.bytes,
                   static_cast<long long>(wrong));
      return 1;
    }

    for (int i = 0; i < s.warmup; ++i) allreduce(ctx, send.data(), recv.data(), count);
    gloo::BarrierOptions barrier(ctx);
    gloo::barrier(barrier);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < s.iters; ++i) allreduce(ctx, send.data(), recv.data(), count);
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        s.iters;
    double slowest = maxOverRanks<double>(ctx, us);
    if (rank == 0) {
      std::printf("%zu %.3f\n", s.bytes, slowest);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: gloo_allreduce RANK NRANKS STORE_DIR SIZE:WARMUP:ITERS...\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int nranks = std::atoi(argv[2]);
  std::vector<Spec> specs;
  for (int i = 4; i < argc; ++i) {
    Spec s{};
    if (std::sscanf(argv[i], "%zu:%d:%d", &s.bytes, &s.warmup, &s.iters) != 3 || s.bytes < 4 ||
        s.bytes % 4 != 0 || s.warmup < 0 || s.iters <= 0) {
      std::fprintf(stderr, "gloo_allreduce: bad SIZE:WARMUP:ITERS '%s'\n", argv[i]);
      return 2;
    }
    specs.push_back(s);
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    std::fprintf(stderr, "gloo_allreduce: rank %d of %d is out of range\n", rank, nranks);
    return 2;
  }
  try {
    return run(rank, nranks, argv[3], specs);
  } catch (const std::exception& e) {  // Gloo reports transport failures by throwing
    std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
