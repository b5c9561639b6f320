// The PCI id database reader (daemon/discovery/pci_ids.h) over any file: the daemon reads
// /usr/share/misc/pci.ids at startup, a file from outside the project. Whatever the bytes, the
// reader must end, and every name it keeps must be non-empty, free of line breaks and no longer
// than a line may be.
// Input: [u16 vendor id, little-endian][the file's bytes].
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "daemon/discovery/pci_ids.h"

namespace {

void requireName(const std::string& name, const char* what) {
  if (!name.empty() && name.size() <= hc::discovery::kMaxPciIdsLineBytes &&
      name.find('\n') == std::string::npos) {
    return;
  }
  std::fprintf(stderr, "pci_ids: bad %s name of %zu bytes\n", what, name.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint16_t vendorId = static_cast<uint16_t>(data[0] | data[1] << 8);
  std::istringstream file(std::string(reinterpret_cast<const char*>(data) + 2, size - 2));
  auto vendor = hc::discovery::readPciIdVendor(file, vendorId);
  if (!vendor) return 0;
  requireName(vendor->name, "vendor");
  for (const auto& [id, device] : vendor->devices) {
    requireName(device.name, "device");
    for (const auto& [subsystem, name] : device.subsystems) requireName(name, "subsystem");
  }
  return 0;
}
