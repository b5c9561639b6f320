// CudaDevice reductions: loading the embedded kernels (daemon/device/kernels, built into a fatbin
// by nvcc) and launching them per ReduceWork, within the kernels' fixed argument block.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "daemon/device/cuda/cuda_api.h"
#include "daemon/device/cuda/cuda_device.h"
#include "daemon/device/cuda/cuda_kernel_image.h"
#include "daemon/device/kernels/launch_plan.h"
#include "daemon/device/kernels/reduce_args.h"

// Defined by embed_fatbin.S (the fatbin's bytes, and the address just past them).
extern "C" const uint8_t hc_reduce_fatbin[];
extern "C" const uint8_t hc_reduce_fatbin_end[];

namespace hc::device {

std::span<const uint8_t> reduceKernelFatbin() {
  return {hc_reduce_fatbin, static_cast<size_t>(hc_reduce_fatbin_end - hc_reduce_fatbin)};
}

namespace {

namespace k = kernels;

constexpr unsigned kThreadsPerBlock = 256;
// Enough resident blocks to cover memory latency on every multiprocessor; beyond that the grid
// stride loop gives each thread more elements instead of more blocks.
constexpr uint64_t kBlocksPerMultiprocessor = 8;

}  // namespace

void CudaDevice::loadKernels() {
  const CudaDriver& d = *driver_;
  const std::string which = "CUDA GPU " + std::to_string(ordinal_) + " (" + info_.model + ")";
  ScopedContext scope(d, context_);
  if (!scope.status().isOk()) {
    stagingFallbackReason_ = scope.status().message();
  } else {
    CUmodule module = nullptr;
    const CUresult loaded = d.moduleLoadData(&module, reduceKernelFatbin().data());
    if (loaded != CUDA_SUCCESS) {
      stagingFallbackReason_ =
          d.describe(loaded, d.moduleLoadData.name) +
          ": the driver cannot load the embedded reduction kernels (sm_80/sm_90 code, "
          "compute_90 PTX; a driver older than the toolkit cannot JIT its PTX)";
    } else {
      for (uint32_t dtype = 0; dtype < k::kNumKernelDtypes && stagingFallbackReason_.empty();
           ++dtype) {
        CUfunction function = nullptr;
        const CUresult found = d.moduleGetFunction(&function, module, k::kReduceKernelNames[dtype]);
        if (found != CUDA_SUCCESS) {
          stagingFallbackReason_ =
              d.describe(found, d.moduleGetFunction.name) + " " + k::kReduceKernelNames[dtype];
        }
        kernels_[dtype] = function;
      }
      if (stagingFallbackReason_.empty()) {
        module_ = module;
      } else {
        (void)d.moduleUnload(module);
      }
    }
    size_t freeBytes = 0;
    size_t total = 0;
    if (d.memGetInfo(&freeBytes, &total) == CUDA_SUCCESS) {
      memoryUse_.freeAfterSetupBytes = freeBytes;
    }
  }
  caps_.reduceKernels = stagingFallbackReason_.empty();
  if (!caps_.reduceKernels) {
    std::fill(std::begin(kernels_), std::end(kernels_), nullptr);
    // Once per device, when it opens: every later reduction takes the staging path quietly.
    spdlog::warn("{}: reductions stage through host memory: {}", which, stagingFallbackReason_);
  }
}

Status CudaDevice::reduceAsync(StreamId stream, const ReduceWork& work) {
  Result<CUstream> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  if (!caps_.reduceKernels) {
    return Status(Code::DeviceError, "CUDA GPU " + std::to_string(ordinal_) +
                                         " has no reduction kernels (" + stagingFallbackReason_ +
                                         "): stage the reduction through host memory");
  }
  // The checks, the chain of launches beyond 16 inputs and the extra outputs' copies are the same
  // for every GPU backend (launch_plan.h); what is CUDA's is the driver calls below.
  Result<k::ReduceLaunchPlan> plan = k::ReduceLaunchPlan::make(work, "CUDA");
  if (!plan.isOk()) return plan.status();
  if (plan->launchCount() == 0) return okStatus();  // no elements: no launch, no context to enter
  for (size_t i = 0; i < plan->launchCount(); ++i) {
    HC_RETURN_IF_ERROR(launchReduce(*handle, static_cast<uint32_t>(work.dtype), plan->launch(i)));
  }

  // Stream order puts the copies after the last launch, when outputs[0] holds the result.
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  const auto source = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(plan->copySource()));
  for (void* target : plan->copyTargets()) {
    HC_CUDA_TRY(d, memcpyAsync, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(target)),
                source, plan->copyBytes(), *handle);
  }
  return okStatus();
}

Status CudaDevice::launchReduce(CUstream stream, uint32_t dtype, const k::ReduceArgs& args) {
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  const uint64_t blocksNeeded = (args.count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const uint64_t maxBlocks = static_cast<uint64_t>(multiprocessors_) * kBlocksPerMultiprocessor;
  const auto blocks =
      static_cast<unsigned>(std::max<uint64_t>(1, std::min(blocksNeeded, maxBlocks)));
  // The kernel's one parameter, by value: the driver copies it at launch.
  void* params[] = {const_cast<k::ReduceArgs*>(&args)};
  HC_CUDA_TRY(d, launchKernel, kernels_[dtype], blocks, 1, 1, kThreadsPerBlock, 1, 1, 0, stream,
              params, nullptr);
  return okStatus();
}

}  // namespace hc::device
