#include "daemon/device/sim/sim_node.h"

#include <memory>
#include <string>
#include <utility>

namespace hc::device {
namespace {

Status checkCount(const char* vendor, int count) {
  if (count < 0 || count > kMaxSimDevicesPerVendor) {
    return invalidArgument(std::string("sim ") + vendor + " devices: " + std::to_string(count) +
                           " is not in [0, " + std::to_string(kMaxSimDevicesPerVendor) + "]");
  }
  return okStatus();
}

}  // namespace

Status addSimDevices(DeviceRegistry& registry, const SimNodeOptions& options,
                     ReduceKernel kernel) {
  HC_RETURN_IF_ERROR(checkCount("nvidia", options.nvidia));
  HC_RETURN_IF_ERROR(checkCount("amd", options.amd));
  const std::pair<Vendor, int> wanted[] = {{Vendor::Nvidia, options.nvidia},
                                           {Vendor::Amd, options.amd}};
  // All or nothing: a collision found halfway would leave a registry nobody asked for.
  for (auto [vendor, count] : wanted) {
    for (int i = 0; i < count; ++i) {
      if (registry.find(vendor, i).isOk()) {
        return invalidArgument(std::string("cannot add sim device ") + vendorName(vendor) + ":" +
                               std::to_string(i) + ": that device is already registered");
      }
    }
  }
  const size_t total = static_cast<size_t>(options.nvidia) + static_cast<size_t>(options.amd);
  if (!options.deviceGBps.empty() && options.deviceGBps.size() != total) {
    return invalidArgument(std::to_string(options.deviceGBps.size()) + " sim device speeds for " +
                           std::to_string(total) + " sim devices");
  }
  for (double gbps : options.deviceGBps) {
    if (!(gbps > 0)) return invalidArgument("a sim device speed must be > 0 GB/s");
  }
  size_t ordinal = 0;
  for (auto [vendor, count] : wanted) {
    for (int i = 0; i < count; ++i, ++ordinal) {
      simdev::StreamTiming timing = options.timing;
      if (!options.deviceGBps.empty()) {
        timing.copyGBps = options.deviceGBps[ordinal];
        timing.kernelGBps = options.deviceGBps[ordinal];
      }
      auto device = std::make_unique<SimDevice>(vendor, i, timing, options.faults, kernel,
                                                options.memoryBytes);
      if (options.nicDirect) device->exposeToTransport();
      HC_RETURN_IF_ERROR(registry.add(std::move(device)));
    }
  }
  return okStatus();
}

}  // namespace hc::device
