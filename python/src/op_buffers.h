// The buffers an operation hands libhcclient: a user tensor itself when hc can take it, else a
// contiguous copy (from the daemon's segment when large enough) that the work copies back after
// success; and the data pointer, counted when the client will stage it. Shared by every op.
#pragma once

#include <ATen/ATen.h>

#include "python/src/work_hetero.h"

namespace hc::torchext {

// A contiguous buffer of numel elements for the daemon to use in place of a user tensor.
at::Tensor scratch(int64_t numel, at::ScalarType dtype);
// t itself when contiguous, else a contiguous copy kept alive by w and, when copyBack, written
// back into t after success.
at::Tensor usable(const at::Tensor& t, WorkHetero& w, bool copyBack);
// The data pointer hc gets; bytes outside the daemon's segment count as staged.
void* ptr(const at::Tensor& t);

}  // namespace hc::torchext
