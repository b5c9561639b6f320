// One-pass host reduction and copy kernels over buffers every local rank has mapped: each chunk of
// every input is read once and each chunk of the result is written once to every output, so an
// allreduce over N ranks of S bytes moves 2*N*S bytes.
// Shared by the daemon's collectives and the client's small-operation path, which is why they live
// in common/ (target hc_reduce) and keep the namespace hc::coll.
// Depends on hc_common only. Thread-safe: the functions keep no state, so the executor may run
// disjoint ranges of one collective on several threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "common/vocabulary.h"

namespace hc::coll {

struct ReduceSpec {
  Dtype dtype;
  RedOp redop;
  const void* const* inputs;  // inputs[i] = rank i's send buffer (already offset)
  size_t nInputs;
  void* const* outputs;  // every buffer that receives the result
  size_t nOutputs;
  // PreMulSum: one scalar per input, its value's bytes in dtype, little-endian, zero-padded;
  // otherwise nullptr.
  const uint64_t* scalars;
  size_t nRanks;  // divisor for Avg (usually == nInputs)
};

// Reduces elements [begin, end) of every input and stores the result to every output, in one
// pass: per chunk of about 16 KiB per buffer, the inputs but the last are combined into a local
// buffer in order (input 0, then 1, ...), and the last is folded in as the results are stored
// into each output, one cache line at a time. Outputs may alias inputs exactly (in place) because
// every input of an element is read before the element is written; partial overlap is not
// allowed. Every call with the same inputs gives bitwise the same result, however the
// executor splits [0, count) into ranges:
//   integer sum, prod and premulsum wrap modulo 2^bits; min and max compare plainly;
//   avg: integers sum then divide by nRanks truncating, floats sum then multiply once by
//   (T)(1.0 / nRanks); premulsum: sum over i of scalar_i * x_i, computed in the dtype.
//   float16, bfloat16 and the fp8 types compute in fp32 (each input decoded exactly, each step
//   rounded to fp32, avg's factor (float)(1.0 / nRanks), the premulsum scalar decoded from the
//   dtype) and round once to the dtype when storing, to nearest even: fp16/bf16 overflow to
//   +-inf, fp8 saturates to +-max finite; see common/numerics/float_types.h.
// Ranges of at least 256 KiB write outputs that are not inputs with non-temporal stores (x86-64),
// fenced before returning, so the results are ordered before whatever the caller does next.
void reduceRange(const ReduceSpec& spec, size_t begin, size_t end);

// Copies bytes [begin, end) of src into every output (broadcast, allgather), reading src once;
// an output equal to src is skipped. Large ranges use non-temporal stores, as reduceRange().
void copyRange(const void* src, void* const* outputs, size_t nOutputs, size_t begin, size_t end);

}  // namespace hc::coll
