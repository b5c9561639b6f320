#include "daemon/server/devices.h"

#include <spdlog/spdlog.h>

#include "daemon/coll/reduce.h"
#include "daemon/device/sim/sim_node.h"
#if defined(HC_HAVE_CUDA)
#include "daemon/device/cuda/cuda_probe.h"
#endif
#if defined(HC_HAVE_HIP)
#include "daemon/device/hip/hip_probe.h"
#endif

namespace hc::server {
namespace {

// The host reduction (coll::reduceRange) as the kernel of the host and sim devices.
void reduceOnHost(const device::ReduceWork& work, size_t begin, size_t end) {
  coll::ReduceSpec spec{work.dtype,
                        work.redop,
                        work.inputs.data(),
                        work.inputs.size(),
                        work.outputs.data(),
                        work.outputs.size(),
                        work.scalars.empty() ? nullptr : work.scalars.data(),
                        work.nRanks};
  coll::reduceRange(spec, begin, end);
}

// Adds the GPUs a vendor probe found; a vendor that is unavailable is one line in the log.
template <typename ProbeResult>
Status addProbed(device::DeviceRegistry& registry, const char* vendor,
                 Result<ProbeResult> probed) {
  if (!probed.isOk()) {
    spdlog::info("{}", probed.status().message());
    return okStatus();
  }
  for (const std::string& why : probed->skipped) spdlog::warn("{}: {}", vendor, why);
  // A device whose kernels did not load said so itself (stagingFallbackReason()).
  for (auto& device : probed->devices) HC_RETURN_IF_ERROR(registry.add(std::move(device)));
  return okStatus();
}

}  // namespace

Result<device::DeviceRegistry> buildDeviceRegistry(const config::DaemonConfig& config) {
  device::DeviceRegistry registry = device::makeHostRegistry(reduceOnHost);
  device::SimNodeOptions sim;
  sim.nvidia = config.simNvidia;
  sim.amd = config.simAmd;
  sim.timing.copyGBps = config.simCopyGbps;
  sim.timing.latencyUs = config.simLatencyUs;
  sim.faults.failCopyAt = config.simFailCopyAt;
  sim.faults.slowStreamUs = config.simSlowStreamUs;
  sim.memoryBytes = config.simMemoryBytes;
  sim.nicDirect = config.simNicDirect;
  HC_RETURN_IF_ERROR(device::addSimDevices(registry, sim, reduceOnHost));
#if defined(HC_HAVE_CUDA)
  HC_RETURN_IF_ERROR(addProbed(registry, "cuda", device::probeCudaDevices()));
#else
  spdlog::info("CUDA unavailable: this hetero-commd was built without the CUDA backend");
#endif
#if defined(HC_HAVE_HIP)
  HC_RETURN_IF_ERROR(addProbed(registry, "hip", device::probeHipDevices()));
#else
  spdlog::info("HIP unavailable: this hetero-commd was built without the HIP backend");
#endif
  std::string text = registry.describe();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  spdlog::info("devices:\n{}", text);
  return registry;
}

}  // namespace hc::server
