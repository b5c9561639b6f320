// The vocabulary of collective operations: operation codes, dtypes and reduction operators, their
// names and sizes, which operations take a root or a peer, and which dtype/operator pairs are
// implemented. The client, the daemon's entry checks, the collective and device layers, the tools
// and the benchmarks all speak it; none keeps a table of its own.
//
// Values cross trust boundaries as bytes (a submission entry, a peer's message); the checked*()
// functions are the one way from such a byte to the type. Code below a boundary takes the type
// and checks nothing again: a Dtype, RedOp or OpType is valid by construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace hc {

// Operation codes of submission entries (common/ipc/protocol.h documents each one's fields).
enum class OpType : uint8_t {
  CommInit = 1,     // join communicator `key` as `rank` of `nranks`; completion value = handle
  CommDestroy = 2,  // leave the communicator; ops after it on other ranks fail
  AllReduce = 3,
  Broadcast = 4,
  Reduce = 5,
  AllGather = 6,
  ReduceScatter = 7,
  Barrier = 8,
  AllToAll = 9,     // count = elements per peer; send and recv hold nranks * count
  Gather = 10,      // count = elements per rank; the root's recv holds nranks * count
  Scatter = 11,     // count = elements per rank; the root's send holds nranks * count
  Send = 12,        // root = the peer rank; send = the data
  Recv = 13,        // root = the peer rank; recv = where the data lands
  CommSplit = 14,   // collective over the parent; splitColor/splitKey
  CommShrink = 15,  // over the parent's survivors: a child without the excluded ranks
  CommRevoke = 16,  // stops the parent's operations on every rank; it stays a parent
};
inline constexpr uint8_t kNumOpTypes = 17;  // one past the largest code

// The element types: the ncclDataType_t and hc_dtype_t values.
enum class Dtype : uint8_t {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
  Fp8e4m3 = 10,
  Fp8e5m2 = 11,
};
inline constexpr uint8_t kNumDtypes = 12;

// Reduction operators: the ncclRedOp_t values of the built-in ones, and PreMulSum for a dynamic
// operator (ncclRedOpCreatePreMulSum) whose scalar travels with the operation.
enum class RedOp : uint8_t { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4, PreMulSum = 5 };
inline constexpr uint8_t kNumRedOps = 6;

// ---- operations ----------------------------------------------------------------------------

constexpr const char* opName(OpType op) {
  switch (op) {
    case OpType::CommInit:
      return "comm_init";
    case OpType::CommDestroy:
      return "comm_destroy";
    case OpType::AllReduce:
      return "allreduce";
    case OpType::Broadcast:
      return "broadcast";
    case OpType::Reduce:
      return "reduce";
    case OpType::AllGather:
      return "allgather";
    case OpType::ReduceScatter:
      return "reduce_scatter";
    case OpType::Barrier:
      return "barrier";
    case OpType::AllToAll:
      return "alltoall";
    case OpType::Gather:
      return "gather";
    case OpType::Scatter:
      return "scatter";
    case OpType::Send:
      return "send";
    case OpType::Recv:
      return "recv";
    case OpType::CommSplit:
      return "comm_split";
    case OpType::CommShrink:
      return "comm_shrink";
    case OpType::CommRevoke:
      return "comm_revoke";
  }
  return "unknown operation";
}

// Combines the ranks' values with a RedOp.
constexpr bool isReduction(OpType op) {
  return op == OpType::AllReduce || op == OpType::Reduce || op == OpType::ReduceScatter;
}
// `root` names the root rank.
constexpr bool hasRoot(OpType op) {
  return op == OpType::Broadcast || op == OpType::Reduce || op == OpType::Gather ||
         op == OpType::Scatter;
}
// `root` names the peer rank.
constexpr bool isPointToPoint(OpType op) { return op == OpType::Send || op == OpType::Recv; }
// Moves elements of a dtype (a barrier, and the communicator's own operations, move none).
constexpr bool movesData(OpType op) {
  return op != OpType::CommInit && op != OpType::CommDestroy && op != OpType::Barrier &&
         op != OpType::CommSplit && op != OpType::CommShrink && op != OpType::CommRevoke;
}

// ---- dtypes --------------------------------------------------------------------------------

constexpr size_t dtypeSize(Dtype d) {
  switch (d) {
    case Dtype::Int8:
    case Dtype::Uint8:
    case Dtype::Fp8e4m3:
    case Dtype::Fp8e5m2:
      return 1;
    case Dtype::Float16:
    case Dtype::Bfloat16:
      return 2;
    case Dtype::Int32:
    case Dtype::Uint32:
    case Dtype::Float32:
      return 4;
    case Dtype::Int64:
    case Dtype::Uint64:
    case Dtype::Float64:
      return 8;
  }
  return 0;
}

// "float32", ...: the names of error messages, traces, metrics and the flight recorder.
constexpr const char* dtypeName(Dtype d) {
  switch (d) {
    case Dtype::Int8:
      return "int8";
    case Dtype::Uint8:
      return "uint8";
    case Dtype::Int32:
      return "int32";
    case Dtype::Uint32:
      return "uint32";
    case Dtype::Int64:
      return "int64";
    case Dtype::Uint64:
      return "uint64";
    case Dtype::Float16:
      return "float16";
    case Dtype::Float32:
      return "float32";
    case Dtype::Float64:
      return "float64";
    case Dtype::Bfloat16:
      return "bfloat16";
    case Dtype::Fp8e4m3:
      return "fp8_e4m3";
    case Dtype::Fp8e5m2:
      return "fp8_e5m2";
  }
  return "unknown";
}

// nccl-tests' names ("float", "half", ...), which hc-perf prints and accepts.
constexpr const char* ncclTestsDtypeName(Dtype d) {
  switch (d) {
    case Dtype::Float16:
      return "half";
    case Dtype::Float32:
      return "float";
    case Dtype::Float64:
      return "double";
    case Dtype::Fp8e4m3:
      return "f8e4m3";
    case Dtype::Fp8e5m2:
      return "f8e5m2";
    default:
      return dtypeName(d);
  }
}

// The 16- and 8-bit floats, which reductions compute in fp32 and round once to the dtype.
constexpr bool isNarrowFloat(Dtype d) {
  return d == Dtype::Float16 || d == Dtype::Bfloat16 || d == Dtype::Fp8e4m3 || d == Dtype::Fp8e5m2;
}

// count * dtypeSize(d) * times; nullopt when the product overflows 64 bits.
constexpr std::optional<uint64_t> bytesOf(uint64_t count, Dtype d, uint64_t times = 1) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(dtypeSize(d)), &bytes) ||
      __builtin_mul_overflow(bytes, times, &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

// ---- reduction operators -------------------------------------------------------------------

constexpr const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::Sum:
      return "sum";
    case RedOp::Prod:
      return "prod";
    case RedOp::Max:
      return "max";
    case RedOp::Min:
      return "min";
    case RedOp::Avg:
      return "avg";
    case RedOp::PreMulSum:
      return "premulsum";
  }
  return "unknown";
}

// Whether the pair is implemented. Every dtype takes every operator: integer sums, products and
// pre-multiplied sums wrap, integer averages truncate, and the narrow floats compute in fp32.
constexpr bool isImplemented(Dtype, RedOp) { return true; }

// ---- from bytes to the types, at a trust boundary -------------------------------------------

constexpr std::optional<OpType> opTypeFrom(long long value) {
  if (value < static_cast<long long>(OpType::CommInit) || value >= kNumOpTypes) return std::nullopt;
  return static_cast<OpType>(value);
}
constexpr std::optional<Dtype> dtypeFrom(long long value) {
  if (value < 0 || value >= kNumDtypes) return std::nullopt;
  return static_cast<Dtype>(value);
}
constexpr std::optional<RedOp> redOpFrom(long long value) {
  if (value < 0 || value >= kNumRedOps) return std::nullopt;
  return static_cast<RedOp>(value);
}

// The same, as InvalidArgument naming the value ("unknown dtype 12", "unknown reduction
// operator 9", "unknown operation 0").
[[nodiscard]] Result<OpType> checkedOpType(long long value);
[[nodiscard]] Result<Dtype> checkedDtype(long long value);
[[nodiscard]] Result<RedOp> checkedRedOp(long long value);
// Both, and that the pair is implemented.
[[nodiscard]] Status checkReduction(long long dtype, long long redop);

// A dtype by its name or nccl-tests' name ("float32" or "float", "fp8_e4m3" or "f8e4m3"), and
// the aliases "bf16" and "half"; nullopt for any other text.
std::optional<Dtype> dtypeNamed(std::string_view name);

}  // namespace hc
