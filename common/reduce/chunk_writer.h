// How the one-pass kernels write results into the outputs (one 64-byte block at a time as they
// are computed, or a run of bytes), shared by reduce.cc and reduce_narrow.cc. Internal to
// hc_reduce.
//
// Why two kinds of store: an output that is not also an input has not been read by this pass, so
// a regular store first reads each of its cache lines from memory (read-for-ownership) only to
// overwrite all of it, and an out-of-place allreduce then moves 3*N*S bytes instead of 2*N*S.
// Non-temporal (streaming) stores write whole lines without reading them. They also bypass the
// cache, which is right for large results and wrong for small ones that the client reads next, so
// only large ranges stream. An output that is also an input (in place) keeps regular stores: its
// lines were just read and are in cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2, part of the x86-64 baseline: _mm_stream_si128, _mm_sfence
#define HC_STREAMING_STORES 1
#else
#define HC_STREAMING_STORES 0
#endif

namespace hc::coll {

// A range writing at least this many bytes into an output that is not an input uses streaming
// stores for it (on x86-64; elsewhere every store is regular).
constexpr size_t kStreamingMinBytes = 256 * 1024;

// Copies `bytes` from src to dst with streaming stores for the 16-byte-aligned part of dst and
// regular stores for the unaligned head and tail. Falls back to memcpy where there are no
// streaming stores. The stores are weakly ordered until fenceStreamingStores().
void streamBytes(void* dst, const void* src, size_t bytes);

// Orders every streaming store of this thread before its later stores (sfence), so that whoever
// the caller then signals sees the data. No-op without streaming stores.
void fenceStreamingStores();

// Stores finished results of one range into every output. Decides per output, once, whether its
// stores stream. Thread-compatible: one writer per range and thread.
class ChunkWriter {
 public:
  // The unit of storeBlock(): one cache line.
  static constexpr size_t kBlockBytes = 64;

  // outputs and inputs are the range's buffers (borrowed for the writer's lifetime); rangeBytes
  // is how many bytes of each output the range writes.
  ChunkWriter(void* const* outputs, size_t nOutputs, const void* const* inputs, size_t nInputs,
              size_t rangeBytes);

  // Writes chunk[0, bytes) at byte offset `offset` of every output. Every input element at those
  // offsets must have been read already (an output may be an input).
  void store(size_t offset, const void* chunk, size_t bytes) const;

  // Writes one 64-byte-aligned block of kBlockBytes at byte offset `offset` of every output, as
  // store() does; streams only where the output is 16-byte aligned at that offset.
  void storeBlock(size_t offset, const void* block) const {
    for (size_t o = 0; o < nOutputs_; ++o) {
      uint8_t* dst = static_cast<uint8_t*>(outputs_[o]) + offset;
      if (streamsOutput(o) && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0) {
        streamBlock(dst, block);
      } else {
        std::memcpy(dst, block, kBlockBytes);
      }
    }
  }

  // Call once after the last store: fences the streaming stores, if any.
  void finish() const;

 private:
  // A small bitmask covers the usual outputs; beyond it, outputs are checked per store.
  static constexpr size_t kMaskedOutputs = 64;

  bool streamsOutput(size_t o) const {
    if (o < kMaskedOutputs) return (streamMask_ >> o) & 1u;
    return largeRange_ && !isInput(outputs_[o]);
  }
  bool isInput(const void* p) const;

  static void streamBlock(uint8_t* dst, const void* block) {
#if HC_STREAMING_STORES
    const auto* s = static_cast<const __m128i*>(block);
    auto* d = reinterpret_cast<__m128i*>(dst);
    const __m128i v0 = _mm_load_si128(s), v1 = _mm_load_si128(s + 1);
    const __m128i v2 = _mm_load_si128(s + 2), v3 = _mm_load_si128(s + 3);
    _mm_stream_si128(d, v0);
    _mm_stream_si128(d + 1, v1);
    _mm_stream_si128(d + 2, v2);
    _mm_stream_si128(d + 3, v3);
#else
    std::memcpy(dst, block, kBlockBytes);
#endif
  }

  void* const* outputs_;
  size_t nOutputs_;
  const void* const* inputs_;
  size_t nInputs_;
  bool largeRange_;
  unsigned long long streamMask_ = 0;  // bit o: output o (< kMaskedOutputs) streams
};

}  // namespace hc::coll
