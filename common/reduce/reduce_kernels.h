// What the kernel files of hc_reduce share (reduce.cc: integers, fp32, fp64 and copies;
// reduce_narrow.cc: fp16, bf16 and fp8): dtype codes, the chunk size, and how kernels are cloned.
// Internal to hc_reduce; other code uses reduce.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/reduce/chunk_writer.h"
#include "common/reduce/reduce.h"

// The chunk kernels are built for AVX2 and for the baseline, and the loader picks one per
// machine. Both give the same bits: the kernel files are compiled with -ffp-contract=off, so
// neither clone fuses a multiply and an add that the other rounds twice. Clang (14) refuses
// target_clones on templates, so a clang build (scripts/asan-build) has the baseline kernel only.
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__clang__)
#if __has_attribute(target_clones)
#define HC_CHUNK_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef HC_CHUNK_CLONES
#define HC_CHUNK_CLONES
#endif
// For the helpers and per-element lambdas of the cloned kernels: one left out of line is compiled
// once, for the baseline, and the AVX2 clone would call it per element.
#define HC_KERNEL_INLINE inline __attribute__((always_inline))
#define HC_KERNEL_LAMBDA_INLINE __attribute__((always_inline))

namespace hc::coll {

// Elements of one chunk are combined in an L1-resident accumulator of this many bytes while every
// input streams through once.
constexpr size_t kChunkBytes = 16 * 1024;

// Stores the results of one chunk: value(j) for j in [0, n), which is element `first + j` of
// every output. Whole 64-byte blocks are computed and stored as they go, so that the loads of the
// last input (which value() folds in) overlap the stores; a store pass over the whole chunk after
// the loads leaves the core waiting on the stores alone, and the out-of-place stores to memory
// are what bound this kernel. The remainder is computed into `tail` and stored from there; value()
// may read tail at its own index (for the wide kernels tail is the accumulator).
// Safe in place: each block reads its elements of every input before any output is written.
template <typename Out, typename Value>
HC_KERNEL_INLINE void storeChunkResults(const ChunkWriter& writer, size_t first, size_t n,
                                        Out* tail, Value value) {
  constexpr size_t kBlock = ChunkWriter::kBlockBytes / sizeof(Out);
  size_t j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    alignas(64) Out block[kBlock];
    for (size_t k = 0; k < kBlock; ++k) block[k] = value(j + k);
    writer.storeBlock((first + j) * sizeof(Out), block);
  }
  if (j == n) return;
  for (size_t k = j; k < n; ++k) tail[k] = value(k);
  writer.store((first + j) * sizeof(Out), tail + j, (n - j) * sizeof(Out));
}

// reduceRange() for the narrow floats (reduce_narrow.cc); same contract.
void reduceNarrowRange(const ReduceSpec& spec, size_t begin, size_t end);

}  // namespace hc::coll
