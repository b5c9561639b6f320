// CudaDevice reductions: loading the embedded kernels (daemon/device/kernels, built into a fatbin
// by nvcc) and launching them per ReduceWork, within the kernels' fixed argument block.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "daemon/device/cuda/cuda_api.h"
#include "daemon/device/cuda/cuda_device.h"
#include "daemon/device/cuda/cuda_kernel_image.h"
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

constexpr size_t kElementBytes[k::kNumKernelDtypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

constexpr unsigned kThreadsPerBlock = 256;
// Enough resident blocks to cover memory latency on every multiprocessor; beyond that the grid
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
                           " inputs of a 16- or 8-bit float in one reduction: the CUDA kernels "
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
    k::ReduceArgs args{};
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
  const CudaDriver& d = *driver_;
  ScopedContext scope(d, context_);
  HC_RETURN_IF_ERROR(scope.status());
  const size_t bytes = work.count * kElementBytes[work.dtype];
  const auto source = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(work.outputs[0]));
  for (size_t o = k::kMaxKernelOutputs; o < nOut; ++o) {
    if (work.outputs[o] == work.outputs[0]) continue;
    HC_CUDA_TRY(d, memcpyAsync,
                static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(work.outputs[o])), source,
                bytes, *handle);
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
