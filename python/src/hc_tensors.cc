#include "python/src/hc_tensors.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

namespace hc::torchext {
namespace {

std::string opLabel(const char* opName) { return std::string("hetero ") + opName + ": "; }

// Shared allocations by start address; the deleters of their tensors remove them.
std::mutex registryMutex;
std::map<uintptr_t, size_t>& registry() {
  static auto* r = new std::map<uintptr_t, size_t>();  // outlives tensors freed at exit
  return *r;
}
std::atomic<uint64_t> staged{0};

// Records an allocation from the segment, which freeShared forgets.
void remember(void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry()[reinterpret_cast<uintptr_t>(p)] = bytes;
}

void freeShared(void* p) {
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    registry().erase(reinterpret_cast<uintptr_t>(p));
  }
  (void)hc_mem_free(p);
}

// Scalar bytes of value in the operation's dtype, for an immediate pre-multiplied sum.
void scalarBytes(double value, hc_dtype_t dtype, unsigned char* out) {
  switch (dtype) {
    case HC_FLOAT32: {
      const float f = static_cast<float>(value);
      std::memcpy(out, &f, sizeof f);
      return;
    }
    case HC_FLOAT64: std::memcpy(out, &value, sizeof value); return;
    case HC_FLOAT16: {
      const c10::Half h(static_cast<float>(value));
      std::memcpy(out, &h.x, sizeof h.x);
      return;
    }
    case HC_BFLOAT16: {
      const c10::BFloat16 b(static_cast<float>(value));
      std::memcpy(out, &b.x, sizeof b.x);
      return;
    }
    default: TORCH_CHECK(false, "hetero: PREMUL_SUM needs a floating-point tensor");
  }
}

}  // namespace

hc_dtype_t toHcDtype(const at::Tensor& t, const char* opName) {
  switch (t.scalar_type()) {
    case at::kFloat: return HC_FLOAT32;
    case at::kDouble: return HC_FLOAT64;
    case at::kHalf: return HC_FLOAT16;
    case at::kBFloat16: return HC_BFLOAT16;
    case at::kChar: return HC_INT8;
    case at::kByte: return HC_UINT8;
    case at::kBool: return HC_UINT8;
    case at::kInt: return HC_INT32;
    case at::kLong: return HC_INT64;
    default:
      TORCH_CHECK(false, opLabel(opName), "dtype ", t.scalar_type(),
                  " is not supported (supported: float32, float64, float16, bfloat16, int8, "
                  "uint8, int32, int64, bool)");
  }
}

Redop::Redop(const c10d::ReduceOp& op, const at::Tensor& t, hc_comm_t comm, const char* opName) {
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    // bool as NCCL treats it: a sum is an OR (max), a product an AND (min).
    case c10d::ReduceOp::SUM: op_ = isBool ? HC_MAX : HC_SUM; return;
    case c10d::ReduceOp::PRODUCT: op_ = isBool ? HC_MIN : HC_PROD; return;
    case c10d::ReduceOp::MIN: op_ = HC_MIN; return;
    case c10d::ReduceOp::MAX: op_ = HC_MAX; return;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, opLabel(opName), "ReduceOp.AVG cannot be used on bool tensors");
      op_ = HC_AVG;
      return;
    case c10d::ReduceOp::PREMUL_SUM: {
      const hc_dtype_t dtype = toHcDtype(t, opName);
      const auto* sup =
          dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(sup != nullptr, opLabel(opName), "PREMUL_SUM without its factor");
      double factor = sup->double_factor;
      if (!sup->tensor_factors.empty()) {
        // One factor per input tensor in torch's API; this backend takes one tensor per call.
        const at::Tensor& f = sup->tensor_factors.front();
        checkCpuDense(f, opName);
        factor = f.item<double>();
      }
      unsigned char bytes[8] = {};
      scalarBytes(factor, dtype, bytes);
      const hc_status_t st =
          hc_redop_create_premul_sum(&op_, bytes, dtype, HC_SCALAR_HOST_IMMEDIATE, comm);
      TORCH_CHECK(st == HC_OK, opLabel(opName), lastError(st, comm));
      premulComm_ = comm;
      return;
    }
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, opLabel(opName), "ReduceOp.",
                  op.op_ == c10d::ReduceOp::BAND   ? "BAND"
                  : op.op_ == c10d::ReduceOp::BOR ? "BOR"
                                                   : "BXOR",
                  " is not supported: hetero-comm has no bitwise reductions (as NCCL)");
    default: TORCH_CHECK(false, opLabel(opName), "unknown ReduceOp ", int(op.op_));
  }
}

Redop::~Redop() {
  if (premulComm_ != nullptr) (void)hc_redop_destroy(op_, premulComm_);
}

void checkCpuDense(const at::Tensor& t, const char* opName) {
  TORCH_CHECK(!t.is_cuda(), opLabel(opName),
              "CUDA tensors are not served by this backend: GPU jobs use PyTorch's own NCCL "
              "backend with hetero-comm's libnccl.so.2 shim first on LD_LIBRARY_PATH (see "
              "shim/README.md)");
  TORCH_CHECK(t.device().is_cpu(), opLabel(opName), "tensors must be on the CPU, not ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, opLabel(opName),
              "only dense tensors are supported, not ", t.layout());
}

at::Tensor emptyShared(int64_t numel, at::ScalarType dtype) {
  TORCH_CHECK(numel >= 0, "hetero_comm.empty: negative size ", numel);
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  void* p = nullptr;
  // A zero-size tensor still gets a page: its data pointer must be hc memory too.
  const hc_status_t st = hc_mem_alloc(&p, bytes == 0 ? 1 : bytes);
  TORCH_CHECK(st == HC_OK, "hetero_comm.empty: ", lastError(st, nullptr));
  remember(p, bytes == 0 ? 1 : bytes);
  return at::from_blob(p, {numel}, freeShared, at::TensorOptions().dtype(dtype));
}

namespace {

// Allocates from the daemon's segment what is large enough to be worth it, and hands the rest,
// and anything the segment cannot hold, to the allocator it replaced.
class SharedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    if (n >= minBytes_) {
      void* p = nullptr;
      if (hc_mem_alloc(&p, n) == HC_OK) {
        remember(p, n);
        return {p, p, &freeShared, c10::Device(c10::DeviceType::CPU)};
      }
    }
    return previous_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  size_t minBytes_ = 0;
  c10::Allocator* previous_ = nullptr;
};

std::mutex allocatorMutex;
SharedAllocator sharedAllocator;
int allocatorDepth = 0;

}  // namespace

void pushSharedAllocator(size_t minBytes) {
  std::lock_guard<std::mutex> lock(allocatorMutex);
  if (allocatorDepth++ == 0) {
    sharedAllocator.previous_ = c10::GetCPUAllocator();
    sharedAllocator.minBytes_ = minBytes;
    c10::SetCPUAllocator(&sharedAllocator);
  }
}

void popSharedAllocator() {
  std::lock_guard<std::mutex> lock(allocatorMutex);
  TORCH_CHECK(allocatorDepth > 0, "hetero_comm.shared_memory: pop without a push");
  if (--allocatorDepth == 0) c10::SetCPUAllocator(sharedAllocator.previous_);
}

bool inSharedMemory(const void* data, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry().upper_bound(a);
  if (it == registry().begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}

void noteBuffer(const void* data, size_t bytes) {
  if (bytes != 0 && !inSharedMemory(data, bytes)) staged.fetch_add(bytes);
}

uint64_t stagedBytes() { return staged.load(); }

std::string lastError(hc_status_t st, hc_comm_t comm) {
  const char* text = hc_get_last_error(comm);
  if (text != nullptr && *text != '\0') return text;
  return std::string(hc_get_error_string(st));
}

}  // namespace hc::torchext
