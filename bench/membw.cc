#include "bench/membw.h"

#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

namespace hc::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChunkFloats = 1024;  // 4 KiB: N chunks and the sum stay in L1 for N <= 6
constexpr int kThreads = 2;
constexpr double kTargetSeconds = 0.2;  // per size: enough repetitions for a stable median
constexpr int kMinReps = 5;
constexpr int kMaxReps = 2000;

// Runs one job on kThreads threads (the caller's and a helper) and times it between two barrier
// points, so thread start-up is not measured.
class TwoThreads {
 public:
  TwoThreads() : sync_(kThreads), helper_([this] { helperLoop(); }) {}
  ~TwoThreads() {
    job_ = nullptr;
    sync_.arrive_and_wait();  // releases the helper, which sees no job and returns
    helper_.join();
  }

  double run(const std::function<void(int)>& job) {
    job_ = &job;
    auto t0 = Clock::now();
    sync_.arrive_and_wait();
    job(0);
    sync_.arrive_and_wait();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  void helperLoop() {
    for (;;) {
      sync_.arrive_and_wait();
      const auto* job = job_;
      if (job == nullptr) return;
      (*job)(1);
      sync_.arrive_and_wait();
    }
  }

  std::barrier<> sync_;
  const std::function<void(int)>* job_ = nullptr;  // written before the barrier releases
  std::thread helper_;
};

// Thread t's share [begin, end) of n items.
std::pair<size_t, size_t> share(size_t n, int t) {
  size_t per = (n + kThreads - 1) / kThreads;
  size_t begin = std::min(n, per * static_cast<size_t>(t));
  return {begin, std::min(n, begin + per)};
}

// The one-pass allreduce of DESIGN.md: per chunk, sum the N inputs into an L1 buffer, then store
// the sum into all N. Plain loops: glibc's memcpy measured slower here.
void onePassChunked(float* const* bufs, int nbufs, size_t floats, int t) {
  alignas(64) float sum[kChunkFloats];
  size_t chunks = (floats + kChunkFloats - 1) / kChunkFloats;
  auto [c0, c1] = share(chunks, t);
  for (size_t c = c0; c < c1; ++c) {
    const size_t off = c * kChunkFloats;
    const size_t len = std::min(kChunkFloats, floats - off);
    const float* first = bufs[0] + off;
    for (size_t i = 0; i < len; ++i) sum[i] = first[i];
    for (int b = 1; b < nbufs; ++b) {
      const float* in = bufs[b] + off;
      for (size_t i = 0; i < len; ++i) sum[i] += in[i];
    }
    for (int b = 0; b < nbufs; ++b) {
      float* out = bufs[b] + off;
      for (size_t i = 0; i < len; ++i) out[i] = sum[i];
    }
  }
}

// The same pass with the sum in a register: N read and N write streams advance together.
template <int N>
void onePassFused(float* const* bufs, size_t floats, int t) {
  auto [i0, i1] = share(floats, t);
  float* p[N];
  for (int b = 0; b < N; ++b) p[b] = bufs[b];
  for (size_t i = i0; i < i1; ++i) {
    float s = p[0][i];
    for (int b = 1; b < N; ++b) s += p[b][i];
    for (int b = 0; b < N; ++b) p[b][i] = s;
  }
}

using FusedKernel = void (*)(float* const*, size_t, int);

// Instantiated for the common rank counts; others use the chunked kernel only.
FusedKernel fusedKernel(int nbufs) {
  switch (nbufs) {
    case 2:
      return onePassFused<2>;
    case 3:
      return onePassFused<3>;
    case 4:
      return onePassFused<4>;
    case 6:
      return onePassFused<6>;
    case 8:
      return onePassFused<8>;
    default:
      return nullptr;
  }
}

void readWrite(float* const* bufs, int nbufs, size_t floats, int t) {
  auto [i0, i1] = share(floats, t);
  for (int b = 0; b < nbufs; ++b) {
    float* p = bufs[b];
    for (size_t i = i0; i < i1; ++i) p[i] += 1.0f;
  }
}

// Median seconds of a job, repeated until about kTargetSeconds have passed.
double medianSeconds(TwoThreads& threads, const std::function<void(int)>& job) {
  std::vector<double> times{threads.run(job)};  // also the warm-up of caches and TLB
  int reps = static_cast<int>(
      std::clamp(kTargetSeconds / std::max(times[0], 1e-9), double{kMinReps}, double{kMaxReps}));
  times.clear();
  for (int i = 0; i < reps; ++i) times.push_back(threads.run(job));
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[static_cast<size_t>(reps / 2)];
}

}  // namespace

const OnePassResult* MemBwReport::find(size_t bytes) const {
  for (const auto& r : onePass) {
    if (r.bytes == bytes) return &r;
  }
  return nullptr;
}

MemBwReport measureMemBw(int nbufs, const std::vector<size_t>& sizes) {
  MemBwReport report;
  report.nbufs = nbufs;
  report.threads = kThreads;
  if (sizes.empty() || nbufs < 1) return report;
  const size_t maxBytes = std::max<size_t>(*std::max_element(sizes.begin(), sizes.end()), 4096);
  const size_t mapBytes = (maxBytes + 4095) / 4096 * 4096;
  std::vector<float*> bufs;
  for (int b = 0; b < nbufs; ++b) {
    void* p = ::mmap(nullptr, mapBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) break;
    std::memset(p, 0, mapBytes);  // fault in now: first touch is far slower than the pass
    bufs.push_back(static_cast<float*>(p));
  }
  if (static_cast<int>(bufs.size()) == nbufs) {
    TwoThreads threads;
    const size_t maxFloats = maxBytes / sizeof(float);
    double t =
        medianSeconds(threads, [&](int tid) { readWrite(bufs.data(), nbufs, maxFloats, tid); });
    report.plainBytes = maxFloats * sizeof(float);
    report.plainGBs = 2.0 * nbufs * static_cast<double>(report.plainBytes) / t / 1e9;
    const double factor = 2.0 * (nbufs - 1) / nbufs;
    for (size_t bytes : sizes) {
      const size_t floats = bytes / sizeof(float);
      t = medianSeconds(threads, [&](int tid) { onePassChunked(bufs.data(), nbufs, floats, tid); });
      // Which kernel is faster depends on N, S and the day: the limit is the faster one.
      if (FusedKernel fused = fusedKernel(nbufs)) {
        t = std::min(t, medianSeconds(threads, [&](int tid) { fused(bufs.data(), floats, tid); }));
      }
      double s = static_cast<double>(bytes);
      report.onePass.push_back({bytes, t * 1e6, 2.0 * nbufs * s / t / 1e9, s / t / 1e9 * factor});
    }
  }
  for (float* p : bufs) ::munmap(p, mapBytes);
  return report;
}

}  // namespace hc::bench
