#include "daemon/server/devices.h"

#include <spdlog/spdlog.h>

#include "common/reduce/reduce.h"
#include "daemon/device/sim/sim_node.h"
#include "daemon/discovery/inventory_format.h"
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
  for (uint32_t mbps : config.simDeviceMbps) sim.deviceGBps.push_back(mbps / 1e3);
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

bool measuresAtStart(const config::DaemonConfig& config) {
  return config.devicesMeasure && config.simFailCopyAt == 0;
}

std::unique_ptr<discovery::DeviceBoard> makeDeviceBoard(const config::DaemonConfig& config,
                                                        const device::DeviceRegistry& devices,
                                                        metrics::DaemonMetrics& metrics) {
  discovery::Inventory inventory = discovery::discoverInventory(devices);
  spdlog::info("inventory: {}", discovery::summarizeInventory(inventory));
  std::string pending = "measuring";
  if (!config.devicesMeasure) {
    pending = "not measured: [devices] measure is off (hcctl devices --measure measures)";
  } else if (config.simFailCopyAt != 0) {
    pending = "not measured at startup: devices.sim.fail_copy_at counts copies (hcctl devices "
              "--measure measures)";
  }
  auto board = std::make_unique<discovery::DeviceBoard>(std::move(inventory), devices,
                                                         discovery::SpeedOptions{}, pending);
  board->setPublishedCallback([&metrics](const std::vector<discovery::GpuRow>& gpus) {
    for (const discovery::GpuRow& gpu : gpus) {
      const discovery::DeviceSpeed& speed = gpu.speed;
      if (!speed.measured) {
        if (gpu.deviceIndex >= 0) spdlog::warn("device {}: not measured: {}", gpu.id, speed.note);
        continue;
      }
      spdlog::info("device {}: weight {:.3f} (rate {:.2f} GB/s: host to device {:.2f}, device to "
                   "host {:.2f}, sum kernel {:.2f} GB/s)",
                   gpu.id, speed.weight, speed.rateGBps, speed.h2dGBps, speed.d2hGBps,
                   speed.reduceGBps);
      metrics.setDeviceWeight(gpu.id, speed.weight, speed.rateGBps);
    }
  });
  return board;
}

}  // namespace hc::server
