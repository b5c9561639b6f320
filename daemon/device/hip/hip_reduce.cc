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
#include "daemon/device/kernels/reduce_args.h"

namespace hc::device {
namespace {

namespace k = kernels;

constexpr size_t kElementBytes[k::kNumKernelDtypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

constexpr unsigned kThreadsPerBlock = 256;  // four 64-lane wavefronts
// Enough resident blocks to cover memory latency on every compute unit; beyond that the grid
// stride loop gives each thread more elements instead of more blocks.
constexpr uint64_t kBlocksPerMultiprocessor = 8;

bool isNarrowFloat(uint32_t dtype) {
  return dtype == k::kDtypeFloat16 || dtype == k::kDtypeBfloat16 || dtype == k::kDtypeFp8E4M3 ||
         dtype == k::kDtypeFp8E5M2;
}

// The PreMulSum scalar 1 in the dtype's encoding: a chained launch folds the previous launch's
// partial result in with it, and 1 * x == x exactly in every integer type, fp32 and fp64.
uint64_t scalarOne(uint32_t dtype) {
  if (dtype == k::kDtypeFloat32) return 0x3F800000u;
  if (dtype == k::kDtypeFloat64) return 0x3FF0000000000000u;
  return 1;
}

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
  if (work.inputs.empty() || work.outputs.empty()) {
    return invalidArgument("reduceAsync needs at least one input and one output");
  }
  if (!work.scalars.empty() && work.scalars.size() != work.inputs.size()) {
    return invalidArgument("reduceAsync: " + std::to_string(work.scalars.size()) + " scalars for " +
                           std::to_string(work.inputs.size()) + " inputs");
  }
  if (work.nRanks == 0) return invalidArgument("reduceAsync: nRanks is 0");
  if (work.dtype >= k::kNumKernelDtypes || work.redop >= k::kNumKernelRedops) {
    return invalidArgument("reduceAsync: unknown dtype " + std::to_string(work.dtype) +
                           " or operator " + std::to_string(work.redop));
  }
  const bool preMulSum = work.redop == k::kRedopPreMulSum;
  if (preMulSum && work.scalars.empty()) {
    return invalidArgument("reduceAsync: premulsum without scalars");
  }
  if (work.count == 0) return okStatus();
  for (const void* in : work.inputs) {
    if (in == nullptr) return invalidArgument("reduceAsync: null input");
  }
  for (void* out : work.outputs) {
    if (out == nullptr) return invalidArgument("reduceAsync: null output");
  }
  const size_t nIn = work.inputs.size();
  const size_t nOut = work.outputs.size();
  if (nIn > k::kMaxKernelInputs && isNarrowFloat(work.dtype)) {
    return invalidArgument("reduceAsync: " + std::to_string(nIn) +
                           " inputs of a 16- or 8-bit float in one reduction: the HIP kernels "
                           "take at most " +
                           std::to_string(k::kMaxKernelInputs) +
                           " (a partial result would round to the dtype); split the inputs or "
                           "stage through host memory");
  }

  // More inputs than one launch takes: each launch after the first folds the previous partial
  // result (kept in an output that no later launch reads as an input) with the next inputs, in
  // rank order, so the result is that of one pass. Avg divides only in the last launch.
  void* partial = work.outputs[0];
  if (nIn > k::kMaxKernelInputs) {
    auto laterInput = [&](const void* out) {
      return std::find(work.inputs.begin() + k::kMaxKernelInputs, work.inputs.end(), out) !=
             work.inputs.end();
    };
    auto it = std::find_if(work.outputs.begin(), work.outputs.end(),
                           [&](void* out) { return !laterInput(out); });
    if (it == work.outputs.end()) {
      return invalidArgument("reduceAsync: every output is also an input beyond the first " +
                             std::to_string(k::kMaxKernelInputs) +
                             ", leaving no room for the partial result");
    }
    partial = *it;
  }

  size_t folded = 0;
  while (folded < nIn) {
    k::ReduceArgs args{};  // entries past nIn / nOut stay zero, as the ABI asks
    args.count = work.count;
    args.nRanks = work.nRanks;
    uint32_t n = 0;
    if (folded > 0) {
      args.in[n] = partial;
      args.scalars[n] = scalarOne(work.dtype);
      ++n;
    }
    for (; n < k::kMaxKernelInputs && folded < nIn; ++n, ++folded) {
      args.in[n] = work.inputs[folded];
      args.scalars[n] = preMulSum ? work.scalars[folded] : 0;
    }
    args.nIn = n;
    const bool last = folded == nIn;
    if (last) {
      args.redop = work.redop;
      args.nOut = static_cast<uint32_t>(std::min<size_t>(nOut, k::kMaxKernelOutputs));
      for (uint32_t o = 0; o < args.nOut; ++o) args.out[o] = work.outputs[o];
    } else {
      args.redop = work.redop == k::kRedopAvg ? uint32_t{k::kRedopSum} : uint32_t{work.redop};
      args.nOut = 1;
      args.out[0] = partial;
    }
    HC_RETURN_IF_ERROR(launchReduce(*handle, work.dtype, args));
  }

  // Outputs beyond one launch's get a copy of the first, after the kernels (stream order), by
  // which time every input has been read.
  const size_t bytes = work.count * kElementBytes[work.dtype];
  for (size_t o = k::kMaxKernelOutputs; o < nOut; ++o) {
    if (work.outputs[o] == work.outputs[0]) continue;
    HC_HIP_TRY(*api_, hipMemcpyAsync, work.outputs[o], work.outputs[0], bytes, hipMemcpyDefault,
               *handle);
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
