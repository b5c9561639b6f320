// Seeded data for hc-perf's checked runs (-c 1). Every input is a small integer chosen so that
// the reduction over all ranks is exact in the element type, whatever order the daemon reduces
// in: sums stay within the type's range (for fp16, bf16 and fp8: within the integers the
// significand holds exactly, so with many ranks only the first few contribute non-zero values),
// products are powers of two that fit, min/max are exact by nature. The bench computes the
// expected values itself from the seed, rank and element index, without the daemon's code. Avg of
// float and double, which NCCL defines as the sum times 1/n, is compared within a few ulps because
// 1/n is inexact for n that are not powers of two; avg of the narrow floats is exact: the fp32 sum
// times (float)(1/n), rounded once to the type (what the daemon promises), computed here by the
// integration tests' independent conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/perf_options.h"

namespace hc::bench {

struct DataSpec {
  hc_dtype_t dtype;
  hc_redop_t redop;  // kNoRedop for broadcast and allgather: plain copies
  int nranks;
  uint64_t seed;  // differs per case, so stale results of an earlier case never pass
};

// Writes rank's input for the global element indices [first, first + n) into buf.
void fillInput(const DataSpec& spec, int rank, size_t first, size_t n, void* buf);

// Fills n elements with a value no checked output can equal by chance in most types.
void fillSentinel(hc_dtype_t dtype, size_t n, void* buf);

// How many of the n elements at buf (global indices [first, first + n)) differ from the
// reduction of every rank's input at the same index.
size_t countWrongReduced(const DataSpec& spec, size_t first, size_t n, const void* buf);

// How many of the n elements at buf differ from rank src's input at indices [first, first + n).
size_t countWrongCopied(const DataSpec& spec, int src, size_t first, size_t n, const void* buf);

}  // namespace hc::bench
