// HipDevice reductions: loading the embedded kernels (daemon/device/kernels, built into a
// code-object bundle by hipcc) and launching them per ReduceWork, within the kernels' fixed
// argument block (daemon/device/kernels/reduce_args.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "daemon/device/hip/hip_api.h"
#include "daemon/device/hip/hip_device.h"
#include "daemon/device/hip/hip_kernel_image.h"
#include "daemon/device/kernels/launch_plan.h"
#include "daemon/device/kernels/reduce_args.h"

namespace hc::device {
namespace {

namespace k = kernels;

constexpr unsigned kThreadsPerBlock = 256;  // four 64-lane wavefronts
// Enough resident blocks to cover memory latency on every compute unit; beyond that the grid
// stride loop gives each thread more elements instead of more blocks.
constexpr uint64_t kBlocksPerMultiprocessor = 8;

std::string joined(const std::vector<std::string>& items) {
  if (items.empty()) return "no readable target";
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

}  // namespace

void HipDevice::loadKernels(std::span<const uint8_t> kernelImage) {
  const HipApi& hip = *api_;
  const std::string which = "HIP GPU " + std::to_string(ordinal_) + " (" + info_.model + ")";
  Status current = makeCurrent();
  if (kernelImage.empty()) {
    stagingFallbackReason_ = "no kernel image was given to load";
  } else if (!current.isOk()) {
    stagingFallbackReason_ = current.message();
  } else {
    hipModule_t module = nullptr;
    const hipError_t loaded = hip.hipModuleLoadData(&module, kernelImage.data());
    if (loaded != hipSuccess) {
      stagingFallbackReason_ =
          hip.describe(loaded, "hipModuleLoadData") +
          ": the runtime cannot load the embedded reduction kernels, built for " +
          joined(offloadBundleGpuTargets(kernelImage)) + " (HC_HIP_ARCHS)";
    } else {
      for (uint32_t dtype = 0; dtype < k::kNumKernelDtypes && stagingFallbackReason_.empty();
           ++dtype) {
        hipFunction_t function = nullptr;
        const hipError_t found =
            hip.hipModuleGetFunction(&function, module, k::kReduceKernelNames[dtype]);
        if (found != hipSuccess) {
          stagingFallbackReason_ =
              hip.describe(found, "hipModuleGetFunction") + " " + k::kReduceKernelNames[dtype];
        }
        kernels_[dtype] = function;
      }
      if (stagingFallbackReason_.empty()) {
        module_ = module;
      } else {
        (void)hip.hipModuleUnload(module);
      }
    }
    size_t freeBytes = 0;
    size_t total = 0;
    if (hip.hipMemGetInfo(&freeBytes, &total) == hipSuccess) {
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

Status HipDevice::reduceAsync(StreamId stream, const ReduceWork& work) {
  Result<hipStream_t> handle = findStream(stream);
  if (!handle.isOk()) return handle.status();
  if (!caps_.reduceKernels) {
    return Status(Code::DeviceError, "HIP GPU " + std::to_string(ordinal_) +
                                         " has no reduction kernels (" + stagingFallbackReason_ +
                                         "): stage the reduction through host memory");
  }
  // The checks, the chain of launches beyond 16 inputs and the extra outputs' copies are the same
  // for every GPU backend (launch_plan.h); what is HIP's is the runtime calls below.
  Result<k::ReduceLaunchPlan> plan = k::ReduceLaunchPlan::make(work, "HIP");
  if (!plan.isOk()) return plan.status();
  for (size_t i = 0; i < plan->launchCount(); ++i) {
    HC_RETURN_IF_ERROR(launchReduce(*handle, static_cast<uint32_t>(work.dtype), plan->launch(i)));
  }

  // Stream order puts the copies after the last launch, when outputs[0] holds the result.
  for (void* target : plan->copyTargets()) {
    HC_HIP_TRY(*api_, hipMemcpyAsync, target, plan->copySource(), plan->copyBytes(),
               hipMemcpyDefault, *handle);
  }
  return okStatus();
}

Status HipDevice::launchReduce(hipStream_t stream, uint32_t dtype, const k::ReduceArgs& args) {
  HC_RETURN_IF_ERROR(makeCurrent());
  const uint64_t blocksNeeded = (args.count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const uint64_t maxBlocks = static_cast<uint64_t>(multiprocessors_) * kBlocksPerMultiprocessor;
  const auto blocks =
      static_cast<unsigned>(std::max<uint64_t>(1, std::min(blocksNeeded, maxBlocks)));
  // The kernel's one parameter, by value: the runtime copies it into the launch.
  void* params[] = {const_cast<k::ReduceArgs*>(&args)};
  HC_HIP_TRY(*api_, hipModuleLaunchKernel, kernels_[dtype], blocks, 1, 1, kThreadsPerBlock, 1, 1,
             /*sharedMemBytes=*/0, stream, params, /*extra=*/nullptr);
  return okStatus();
}

}  // namespace hc::device
