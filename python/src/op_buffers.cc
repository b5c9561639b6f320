#include "python/src/op_buffers.h"

#include "python/src/hc_tensors.h"

namespace hc::torchext {
namespace {

// Below this, an allocation from the daemon (one round trip) costs more than the client's copy.
constexpr size_t kSharedScratchBytes = 64 * 1024;

}  // namespace

at::Tensor scratch(int64_t numel, at::ScalarType dtype) {
  if (static_cast<size_t>(numel) * c10::elementSize(dtype) >= kSharedScratchBytes) {
    return emptyShared(numel, dtype);
  }
  return at::empty({numel}, at::TensorOptions().dtype(dtype));
}

at::Tensor usable(const at::Tensor& t, WorkHetero& w, bool copyBack) {
  if (t.is_contiguous()) return t;
  at::Tensor c = scratch(t.numel(), t.scalar_type()).view(t.sizes());
  c.copy_(t);
  w.keepAlive.push_back(c);
  if (copyBack) w.afterSuccess.push_back([t, c]() mutable { t.copy_(c); });
  return c;
}

void* ptr(const at::Tensor& t) {
  noteBuffer(t.data_ptr(), t.numel() * t.element_size());
  return t.data_ptr();
}

}  // namespace hc::torchext
