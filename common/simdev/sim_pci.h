// The PCI address of a simulated device. A client names the GPU of an allocation by PCI address
// (MemRegisterFrame::pciAddress) because runtime ordinals differ between processes that see
// different *_VISIBLE_DEVICES; a sim device sits on no bus, so it gets a synthetic address that
// the client's sim runtime and the daemon's registry compute from the same two facts, its vendor
// label and its index. Synthetic: no real device has it, and nothing outside hetero-comm ever
// sees it (the daemon's DeviceInfo::pciBusId of a sim device stays empty).
// Header-only; depends on common/ipc/protocol.h.
#pragma once

#include <cstdint>
#include <optional>

#include "common/ipc/protocol.h"

namespace hc::simdev {

// Domain ff00 + the vendor (ipc::DeviceVendor: 1 nvidia, 2 amd), bus = index, device 0,
// function 0: sim nvidia:3 is "ff01:03:00.0". nullopt for an index that does not fit a bus
// number (a node has at most 16 sim devices per vendor) or an unknown vendor.
constexpr uint32_t kSimPciDomainBase = 0xff00;

constexpr std::optional<uint32_t> simPciAddress(uint8_t vendor, int index) {
  if (vendor != static_cast<uint8_t>(ipc::DeviceVendor::Nvidia) &&
      vendor != static_cast<uint8_t>(ipc::DeviceVendor::Amd)) {
    return std::nullopt;
  }
  if (index < 0 || index > 0xff) return std::nullopt;
  return ipc::packPciAddress(kSimPciDomainBase | vendor, static_cast<uint32_t>(index), 0, 0);
}

}  // namespace hc::simdev
