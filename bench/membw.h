// The memory-bound limit of a local allreduce, measured in hc-perf's own process before the ranks
// start: a one-pass kernel over N buffers of S bytes, run by 2 threads, that reads every buffer
// once and writes the sum into every buffer once. It moves 2*N*S bytes, the least any local
// allreduce can, so a daemon that maps every rank's buffer can at best match it. Two variants are
// timed, per cache-sized chunk through an L1 buffer (DESIGN.md, baselines.md) and with the sum in a
// register (all 2N streams advance together), and the faster one sets the limit. Also a plain
// 2-thread read+write pass over the same memory, for reference.
#pragma once

#include <cstddef>
#include <vector>

namespace hc::bench {

struct OnePassResult {
  size_t bytes;   // S, per buffer
  double timeUs;  // median time of one pass
  double memGBs;  // 2*N*S / time: read plus written bytes per second
  double busBw;   // (S / time) * 2(N-1)/N, the nccl-tests allreduce busbw of the pass
};

struct MemBwReport {
  int nbufs = 0;
  int threads = 0;
  size_t plainBytes = 0;  // bytes of each buffer in the plain pass (the largest S)
  double plainGBs = 0;    // plain read+write pass: 2*N*S / time
  std::vector<OnePassResult> onePass;

  const OnePassResult* find(size_t bytes) const;
};

// Measures the plain pass over N buffers of the largest size and the one-pass kernel at every
// size in sizes. Allocates N * max(sizes) bytes, freed before returning. Starts and joins its own
// threads: none is left running (the caller forks afterwards).
MemBwReport measureMemBw(int nbufs, const std::vector<size_t>& sizes);

}  // namespace hc::bench
