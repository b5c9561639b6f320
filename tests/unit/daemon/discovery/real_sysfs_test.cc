// Discovery on this machine's real /sys: whatever it finds, scanning must succeed and every form
// of the inventory must hold together. Prints the tables so a run shows what the node has.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "daemon/discovery/inventory.h"
#include "daemon/discovery/inventory_format.h"

namespace hc::discovery {
namespace {

TEST(RealSysfsTest, ScansThisMachineWithoutFailing) {
  std::error_code ec;
  if (!std::filesystem::exists("/sys/bus/pci", ec) &&
      !std::filesystem::exists("/sys/class/net", ec)) {
    GTEST_SKIP() << "no sysfs mounted at /sys";
  }
  device::DeviceRegistry registry = device::makeHostRegistry(nullptr);
  Inventory inventory = discoverInventory(registry);

  for (const GpuRow& gpu : inventory.gpus) {
    EXPECT_EQ(gpu.backend, "none") << gpu.id;  // this registry has no GPU runtime
    EXPECT_TRUE(normalizePciBusId(gpu.placement.busId).has_value()) << gpu.id;
    EXPECT_EQ(gpu.id.rfind("pci-", 0), 0u) << gpu.id;
  }
  for (const Nic& nic : inventory.nics) {
    EXPECT_FALSE(nic.name.empty());
    if (nic.isVirtual) {
      EXPECT_FALSE(nic.placement.onPci()) << nic.name;
    }
    if (nic.name == "lo") {
      EXPECT_TRUE(nic.isLoopback);
    }
  }
  std::string table = formatInventoryTable(inventory);
  EXPECT_EQ(table.rfind("ID  VENDOR  MODEL", 0), 0u) << table;
  EXPECT_FALSE(nlohmann::json::parse(inventoryToJson(inventory), nullptr, false).is_discarded());
  std::string summary = summarizeInventory(inventory);
  EXPECT_EQ(summary.find('\n'), std::string::npos);

  std::cout << table << formatNicTable(inventory) << formatRdmaTable(inventory) << summary << "\n";
  for (const std::string& note : inventory.notes) std::cout << "note: " << note << "\n";
}

}  // namespace
}  // namespace hc::discovery
