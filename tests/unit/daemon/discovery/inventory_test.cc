// buildInventory: merging the PCI scan with the DeviceRegistry, ids, and nearest NICs.
#include "daemon/discovery/inventory.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "daemon/device/host/host_device.h"
#include "tests/unit/daemon/discovery/fake_gpu_device.h"
#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

using device::Vendor;
using testing::describedDevice;

constexpr uint64_t kGiB = 1ull << 30;

const GpuRow* findRow(const Inventory& inventory, const std::string& id) {
  auto it = std::find_if(inventory.gpus.begin(), inventory.gpus.end(),
                         [&](const GpuRow& r) { return r.id == id; });
  return it == inventory.gpus.end() ? nullptr : &*it;
}

// The typical node with a CUDA device on the A100 (bus id as CUDA spells it), a HIP device on
// the MI210 that knows neither its name nor its memory, a simulated device, and the host.
class InventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::buildTypicalNode(fake_);
    ASSERT_TRUE(registry_.add(std::make_unique<device::HostDevice>(nullptr)).isOk());
    ASSERT_TRUE(registry_
                    .add(describedDevice(Vendor::Nvidia, 0, "cuda", "NVIDIA A100-SXM4-80GB (cuda)",
                                         80 * kGiB, "00000000:3B:00.0"))
                    .isOk());
    ASSERT_TRUE(
        registry_.add(describedDevice(Vendor::Amd, 0, "hip", "", 0, "0000:C1:00.0")).isOk());
    ASSERT_TRUE(registry_.add(describedDevice(Vendor::Amd, 7, "sim", "simulated AMD", 2 * kGiB, ""))
                    .isOk());
    inventory_ = discoverInventory(registry_, fake_.roots());
  }

  testing::FakeSysfs fake_;
  device::DeviceRegistry registry_;
  Inventory inventory_;
};

TEST_F(InventoryTest, OneRowPerGpuWithTheDocumentedIds) {
  std::vector<std::string> ids;
  for (const GpuRow& row : inventory_.gpus) ids.push_back(row.id);
  // Registry order first (the host has no row), then GPUs no runtime drives, in bus order.
  EXPECT_EQ(ids, (std::vector<std::string>{"nvidia:0", "amd:0", "sim-amd:7", "pci-intel:0",
                                           "pci-nvidia:0", "pci-nvidia:1"}));
}

TEST_F(InventoryTest, RuntimeDeviceMatchesItsPciGpuAcrossCaseAndDomainWidth) {
  const GpuRow* row = findRow(inventory_, "nvidia:0");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->backend, "cuda");
  EXPECT_EQ(row->vendor, "nvidia");
  EXPECT_EQ(row->model, "NVIDIA A100-SXM4-80GB (cuda)");  // the runtime's name wins
  EXPECT_EQ(row->vramBytes, 80 * kGiB);
  EXPECT_EQ(row->placement.busId, "0000:3b:00.0");
  EXPECT_EQ(row->placement.numaNode, 1);
  EXPECT_EQ(row->driver, "nvidia");
  EXPECT_EQ(row->deviceIndex, 0);
}

TEST_F(InventoryTest, PciScanFillsWhatTheRuntimeLeftEmpty) {
  const GpuRow* row = findRow(inventory_, "amd:0");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->backend, "hip");
  EXPECT_EQ(row->model, "AMD Instinct MI210");
  EXPECT_EQ(row->vramBytes, 68702699520u);
  EXPECT_EQ(row->placement.busId, "0000:c1:00.0");
  EXPECT_EQ(row->placement.numaNode, 0);
}

TEST_F(InventoryTest, SimulatedDeviceIsItsOwnRowWithoutPci) {
  const GpuRow* row = findRow(inventory_, "sim-amd:7");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->backend, "sim");
  EXPECT_EQ(row->vendor, "amd");
  EXPECT_EQ(row->vramBytes, 2 * kGiB);
  EXPECT_FALSE(row->placement.onPci());
  EXPECT_EQ(row->placement.numaNode, -1);
  EXPECT_TRUE(row->nearestNics.empty());
}

TEST_F(InventoryTest, GpusWithoutRuntimeHaveBackendNone) {
  for (const char* id : {"pci-intel:0", "pci-nvidia:0", "pci-nvidia:1"}) {
    const GpuRow* row = findRow(inventory_, id);
    ASSERT_NE(row, nullptr) << id;
    EXPECT_EQ(row->backend, "none") << id;
    EXPECT_EQ(row->deviceIndex, -1) << id;
  }
  EXPECT_EQ(findRow(inventory_, "pci-nvidia:0")->placement.busId, "0000:5e:00.0");
  EXPECT_EQ(findRow(inventory_, "pci-intel:0")->model, "Intel device 0x56a0");
}

TEST_F(InventoryTest, HostDeviceIsNotAGpu) {
  for (const GpuRow& row : inventory_.gpus) {
    EXPECT_NE(row.vendor, "host") << row.id;
    EXPECT_NE(row.backend, "host") << row.id;
  }
}

TEST_F(InventoryTest, EachGpuNamesItsNearestPhysicalNics) {
  const GpuRow* a100 = findRow(inventory_, "nvidia:0");
  EXPECT_EQ(a100->nearestNics, std::vector<std::string>{"ens1f0"});
  EXPECT_EQ(a100->nicLocality, Locality::SamePciSwitch);
  // The Intel GPU hangs off the host bridge, like both NICs' paths: a tie.
  const GpuRow* intel = findRow(inventory_, "pci-intel:0");
  EXPECT_EQ(intel->nearestNics, (std::vector<std::string>{"ens1f0", "eth0"}));
  EXPECT_EQ(intel->nicLocality, Locality::SameHostBridge);
  // The MI210 sits on the other socket; eth0 reports no NUMA node and cannot be placed.
  const GpuRow* mi210 = findRow(inventory_, "amd:0");
  EXPECT_EQ(mi210->nearestNics, std::vector<std::string>{"ens1f0"});
  EXPECT_EQ(mi210->nicLocality, Locality::CrossNumaNode);
}

TEST_F(InventoryTest, KeepsNicsAndNotes) {
  EXPECT_EQ(inventory_.nics.size(), 4u);
  EXPECT_EQ(inventory_.rdmaDevices.size(), 1u);
  ASSERT_EQ(inventory_.notes.size(), 1u);  // the unreadable PCI function
}

TEST(InventoryMergeTest, UnmatchedRuntimeBusIdIsListedAndNoted) {
  device::DeviceRegistry registry;
  ASSERT_TRUE(registry
                  .add(describedDevice(Vendor::Nvidia, 3, "cuda", "NVIDIA H100", 80 * kGiB,
                                       "00000000:AF:00.0"))
                  .isOk());
  PciScan pci;
  NetworkScan network;
  Inventory inventory = buildInventory(pci, registry, network);
  ASSERT_EQ(inventory.gpus.size(), 1u);
  EXPECT_EQ(inventory.gpus[0].id, "nvidia:3");
  EXPECT_EQ(inventory.gpus[0].placement.busId, "0000:af:00.0");
  EXPECT_EQ(inventory.gpus[0].placement.numaNode, -1);
  ASSERT_EQ(inventory.notes.size(), 1u);
  EXPECT_NE(inventory.notes[0].find("nvidia:3"), std::string::npos) << inventory.notes[0];
}

TEST(InventoryMergeTest, HostOnlyNodeHasNoGpuRows) {
  device::DeviceRegistry registry = device::makeHostRegistry(nullptr);
  Inventory inventory = buildInventory(PciScan{}, registry, NetworkScan{});
  EXPECT_TRUE(inventory.gpus.empty());
  EXPECT_TRUE(inventory.notes.empty());
}

}  // namespace
}  // namespace hc::discovery
