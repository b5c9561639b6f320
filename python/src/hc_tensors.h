// How torch tensors become hc buffers: dtype and ReduceOp mapping (by name: torch's numbering is
// not hc's), the checks every tensor passes, and the process-wide registry of tensors that live in
// the daemon's shared memory (hetero_comm.empty), which is what tells zero copy from staging.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>
#include <string>

#include "hetero_comm/hc.h"

namespace hc::torchext {

// hc's dtype for t; bool travels as uint8 as it does in NCCL. Raises (c10::Error) on the rest.
hc_dtype_t toHcDtype(const at::Tensor& t, const char* opName);

// A reduction for one operation: a built-in hc_redop_t, or a pre-multiplied sum created on comm
// and destroyed when this object goes (after the operation is issued: hc captures the scalar).
class Redop {
 public:
  Redop(const c10d::ReduceOp& op, const at::Tensor& t, hc_comm_t comm, const char* opName);
  ~Redop();
  Redop(const Redop&) = delete;
  Redop& operator=(const Redop&) = delete;
  hc_redop_t get() const { return op_; }

 private:
  hc_redop_t op_ = HC_SUM;
  hc_comm_t premulComm_ = nullptr;  // set when op_ was created and must be destroyed
};

// Raises unless t is a dense CPU tensor (a CUDA tensor gets directions to the NCCL shim).
void checkCpuDense(const at::Tensor& t, const char* opName);

// Allocation of zero-copy tensors: hc_mem_alloc memory, freed with the tensor.
at::Tensor emptyShared(int64_t numel, at::ScalarType dtype);
// While at least one push is in force, CPU allocations of at least minBytes come from the daemon's
// segment (falling back to torch's allocator when it is full), so tensors made then, such as
// DDP's gradient buckets, go without staging. Process-wide; pops restore torch's allocator.
void pushSharedAllocator(size_t minBytes);
void popSharedAllocator();
// True when [data, data+bytes) lies inside one allocation from the daemon's segment.
bool inSharedMemory(const void* data, size_t bytes);
// Counts bytes handed to libhcclient from other memory (which the client stages): the proof that
// hetero_comm.empty tensors go without a copy.
void noteBuffer(const void* data, size_t bytes);
uint64_t stagedBytes();

// The text of the last error on comm, or of the status when there is none.
std::string lastError(hc_status_t st, hc_comm_t comm);

}  // namespace hc::torchext
