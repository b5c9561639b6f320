#include "daemon/device/device.h"

#include <algorithm>

namespace hc::device {

const char* vendorName(Vendor vendor) {
  switch (vendor) {
    case Vendor::Host:
      return "host";
    case Vendor::Nvidia:
      return "nvidia";
    case Vendor::Amd:
      return "amd";
  }
  return "unknown";
}

std::string deviceLabel(const DeviceInfo& info) {
  return info.backend + " " + vendorName(info.vendor) + ":" + std::to_string(info.index);
}

const char* memoryTypeName(MemoryType type) {
  switch (type) {
    case MemoryType::Host:
      return "host";
    case MemoryType::Sim:
      return "sim";
    case MemoryType::Cuda:
      return "cuda";
    case MemoryType::Hip:
      return "hip";
  }
  return "unknown";
}

bool Capabilities::transportCanAccess(MemoryType type) const {
  return std::find(transportMemory.begin(), transportMemory.end(), type) != transportMemory.end();
}

}  // namespace hc::device
