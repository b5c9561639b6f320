// Where a device sits on the node: its PCI function, NUMA node and the chain of PCI bridges above
// it, and how near two devices are to each other (a GPU and the NIC it should use).
// Depends on hc_common only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hc::discovery {

struct PciPlacement {
  std::string busId;  // "0000:3b:00.0"; empty when the device is not on PCI (virtual, unknown)
  int numaNode = -1;  // -1: the kernel reports none (single-node machines, some VMs)
  // The sysfs device path from the host bridge down to the device itself, e.g.
  // {"pci0000:3a", "0000:3a:00.0", "0000:3b:00.0"}: every element between the two ends is a
  // PCI bridge (a root port, a switch port). Empty when busId is.
  std::vector<std::string> path;

  bool onPci() const { return !busId.empty(); }
};

// The PCI function nearest above `deviceDir` (a sysfs device directory or a link to one: a PCI
// function itself, or a class device's `device` link such as /sys/class/net/eth0/device, which
// may point at a virtio or auxiliary device below the function). numa_node is read from that
// function. An empty placement when no PCI function lies above it.
PciPlacement pciPlacementOf(const std::filesystem::path& deviceDir);

// How traffic between two devices travels, nearest first, so that values compare. Roughly NCCL's
// path types: SamePciSwitch ~ PIX/PXB (peer-to-peer without the CPU), SameHostBridge ~ PHB,
// SameNumaNode ~ NODE, CrossNumaNode ~ SYS.
enum class Locality : uint8_t {
  SamePciSwitch,   // a shared bridge below the host bridge
  SameHostBridge,  // only the host bridge (root complex) in common
  SameNumaNode,    // different host bridges, one NUMA node
  CrossNumaNode,   // through the inter-socket link
  Unknown,         // either device is not on PCI, or NUMA information is missing on one side
};

const char* localityName(Locality locality);  // "pcie-switch", "host-bridge", "numa-node", ...

// Symmetric. Two devices that both report NUMA node -1 count as one node: the kernel reports -1
// on single-node machines, which are the common case of a missing value.
Locality localityBetween(const PciPlacement& a, const PciPlacement& b);

}  // namespace hc::discovery
