#include "common/reduce/chunk_writer.h"

namespace hc::coll {
namespace {

constexpr bool kHaveStreamingStores = HC_STREAMING_STORES != 0;

}  // namespace

void streamBytes(void* dst, const void* src, size_t bytes) {
#if HC_STREAMING_STORES
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Regular stores up to the first 16-byte boundary of dst: the streaming store needs alignment.
  const size_t misalign = reinterpret_cast<uintptr_t>(d) & 15u;
  const size_t head = misalign == 0 ? 0 : (16 - misalign < bytes ? 16 - misalign : bytes);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  // Four stores per iteration fill one 64-byte line, so the write-combining buffer flushes whole
  // lines. Loads are unaligned: src keeps the misalignment of the head.
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), v1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), v2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), v3);
  }
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
  std::memcpy(d + i, s + i, bytes - i);  // the tail, shorter than 16 bytes
#else
  std::memcpy(dst, src, bytes);
#endif
}

void fenceStreamingStores() {
#if HC_STREAMING_STORES
  _mm_sfence();
#endif
}

ChunkWriter::ChunkWriter(void* const* outputs, size_t nOutputs, const void* const* inputs,
                         size_t nInputs, size_t rangeBytes)
    : outputs_(outputs),
      nOutputs_(nOutputs),
      inputs_(inputs),
      nInputs_(nInputs),
      largeRange_(kHaveStreamingStores && rangeBytes >= kStreamingMinBytes) {
  if (!largeRange_) return;
  for (size_t o = 0; o < nOutputs && o < kMaskedOutputs; ++o) {
    if (!isInput(outputs[o])) streamMask_ |= 1ull << o;
  }
}

bool ChunkWriter::isInput(const void* p) const {
  for (size_t i = 0; i < nInputs_; ++i) {
    if (inputs_[i] == p) return true;
  }
  return false;
}

void ChunkWriter::store(size_t offset, const void* chunk, size_t bytes) const {
  for (size_t o = 0; o < nOutputs_; ++o) {
    void* dst = static_cast<uint8_t*>(outputs_[o]) + offset;
    if (streamsOutput(o)) {
      streamBytes(dst, chunk, bytes);
    } else {
      std::memcpy(dst, chunk, bytes);
    }
  }
}

void ChunkWriter::finish() const {
  if (largeRange_) fenceStreamingStores();
}

}  // namespace hc::coll
