// The best read and write rates this machine reaches with 2 threads over memory far larger than
// its caches: the B_read and B_write of hc-perf's bound (bound_model.h). Several kernels are
// timed and the best of each direction wins, because which one is fastest depends on the CPU:
//   read:  a plain loop, AVX2 loads;
//   write: a plain loop, AVX2 stores (both read each line for ownership first), non-temporal
//          16-byte stores per 64-byte block (the daemon's ChunkWriter), non-temporal 32-byte
//          stores;
//   both:  the daemon's one-pass kernel for 2 inputs, reproduced here (bench/ may not link
//          daemon/coll): per 64-byte block, sum both inputs with AVX2 and store the block to both
//          outputs, in place with regular stores and out of place with non-temporal ones.
//          A kernel that reads R and writes W bytes in t seconds proves rates of R/t and W/t at
//          once, so it counts towards both.
// Each kernel's best of a few passes counts: a bound takes the best the machine did, not its
// typical day. Why the earlier in-process "limit" was beaten is written down in bench/README.md.
#pragma once

#include <cstddef>
#include <string>

#include "bench/bound_model.h"

namespace hc::bench {

struct StreamMeasurement {
  StreamRates best;
  std::string readKernel;  // the kernel that set best.readBps
  std::string writeKernel;
  double seconds = 0;  // how long the measurement took
};

class StreamBench {
 public:
  // Maps bufferBytes (rounded up to 2 MiB) and touches every page. bufferBytes 0: nothing mapped,
  // measure() returns zero rates.
  explicit StreamBench(size_t bufferBytes);
  ~StreamBench();
  StreamBench(const StreamBench&) = delete;
  StreamBench& operator=(const StreamBench&) = delete;

  // Times every kernel on 2 threads it starts and joins before returning (so a caller that forks
  // later has none left running). Call while nothing else of this run uses the CPUs.
  StreamMeasurement measure();

  size_t bufferBytes() const { return bytes_; }

 private:
  unsigned char* buffer_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace hc::bench
