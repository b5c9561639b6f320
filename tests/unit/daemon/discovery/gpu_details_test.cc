// What the inventory knows of each GPU without a vendor runtime, on a node with NVIDIA, AMD and
// Intel GPUs: model and VRAM with their sources, driver version, PCIe link; and that a broken or
// missing file leaves the value unknown.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "daemon/discovery/inventory.h"
#include "daemon/discovery/inventory_format.h"
#include "tests/unit/daemon/discovery/fake_gpu_device.h"
#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

namespace fs = std::filesystem;
using testing::Attributes;
using testing::FakeSysfs;

constexpr uint64_t kGiB = 1ull << 30;

constexpr const char* kPciIds =
    "# pci.ids, the entries this node needs\n"
    "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
    "\t74a1  Aqua Vanjaram [Instinct MI300X]\n"
    "10de  NVIDIA Corporation\n"
    "\t20b2  GA100 [A100 SXM4 80GB]\n"
    "\t\t10de 1463  A100-SXM4-80GB\n"
    "\t2330  GH100 [H100 SXM5 80GB]\n"
    "8086  Intel Corporation\n"
    "\t0bd5  Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]\n"
    "\t56c0  ATS-M [Data Center GPU Flex 170]\n"
    "\t\t8086 4905  Data Center GPU Flex 170\n"
    "C 03  Display controller\n"
    "\t00  VGA compatible controller\n";

// BAR0 registers (16 MiB), BAR1 the 64-bit prefetchable window onto VRAM (128 GiB), BAR3 (32 MiB),
// the ROM, and an SR-IOV window (line 8) larger than BAR1 that is not the GPU's own.
constexpr const char* kNvidiaResource =
    "0x00000000e2000000 0x00000000e2ffffff 0x0000000000040200\n"
    "0x0000200000000000 0x0000201fffffffff 0x000000000014220c\n"
    "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
    "0x0000202000000000 0x0000202001ffffff 0x000000000014220c\n"
    "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
    "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
    "0x00000000e3000000 0x00000000e307ffff 0x0000000000046200\n"
    "0x0000300000000000 0x000033ffffffffff 0x000000000014220c\n";

Attributes pciAttributes(const std::string& vendor, const std::string& device,
                         const std::string& classCode) {
  return {{"vendor", vendor},
          {"device", device},
          {"class", classCode},
          {"numa_node", "0"},
          {"current_link_speed", "16.0 GT/s PCIe"},
          {"current_link_width", "16"},
          {"max_link_speed", "32.0 GT/s PCIe"},
          {"max_link_width", "16"}};
}

// pci0000:00 ─┬ 0000:00:02.0 Intel integrated (i915, nothing published)
//             ├ 0000:01:00.0 NVIDIA H100, no driver bound (pci.ids, BAR, gen4 link in a gen5 slot)
//             ├ 0000:02:00.0 NVIDIA A100, nvidia driver (procfs Model and version)
//             ├ 0000:03:00.0 AMD MI300X, amdgpu DKMS (product_name, mem_info_vram_total, version)
//             ├ 0000:04:00.0 Intel Max 1550 on xe (two tiles of 64 GiB)
//             └ 0000:05:00.0 Intel Flex 170 on i915 (drm/card1/lmem_total_bytes, 16 GiB)
void buildThreeVendorNode(const FakeSysfs& fake) {
  fake.writePciIds(kPciIds);
  Attributes integrated = pciAttributes("0x8086", "0xa7a0", "0x030000");
  integrated.erase("max_link_speed");  // not a PCIe device: no link attributes
  integrated.erase("max_link_width");
  integrated.erase("current_link_speed");
  integrated.erase("current_link_width");
  fake.addPci({"pci0000:00"}, "0000:00:02.0", integrated, "i915");

  Attributes h100 = pciAttributes("0x10de", "0x2330", "0x030200");
  h100["subsystem_vendor"] = "0x10de";
  h100["subsystem_device"] = "0x16c1";  // not in the file: the device's name
  h100["resource"] = kNvidiaResource;
  fake.addPci({"pci0000:00"}, "0000:01:00.0", h100);

  Attributes a100 = pciAttributes("0x10de", "0x20b2", "0x030200");
  a100["subsystem_vendor"] = "0x10de";
  a100["subsystem_device"] = "0x1463";
  a100["current_link_speed"] = "2.5 GT/s PCIe";  // idle links train down
  a100["max_link_speed"] = "16.0 GT/s PCIe";
  a100["resource"] = kNvidiaResource;
  fake.addPci({"pci0000:00"}, "0000:02:00.0", a100, "nvidia");
  fake.writeProc("driver/nvidia/gpus/0000:02:00.0/information",
                 "Model: \t\t NVIDIA A100-SXM4-80GB\nGPU UUID: \t GPU-0001");
  fake.writeProc("driver/nvidia/version",
                 "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 "
                 "UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)");

  Attributes mi300x = pciAttributes("0x1002", "0x74a1", "0x120000");
  mi300x["product_name"] = "AMD Instinct MI300X OAM";
  mi300x["mem_info_vram_total"] = "206141652992";
  mi300x["resource"] = "0x0000220000000000 0x00002207ffffffff 0x000000000014220c";  // not used
  fake.addPci({"pci0000:00"}, "0000:03:00.0", mi300x, "amdgpu");
  fake.write("module/amdgpu/version", "6.7.0");

  fs::path max1550 = fake.addPci({"pci0000:00"}, "0000:04:00.0",
                                 pciAttributes("0x8086", "0x0bd5", "0x038000"), "xe");
  fake.write(max1550 / "tile0/physical_vram_size_bytes", "68719476736");
  fake.write(max1550 / "tile1/physical_vram_size_bytes", "0x1000000000");  // hex, 64 GiB

  Attributes flex = pciAttributes("0x8086", "0x56c0", "0x038000");
  flex["subsystem_vendor"] = "0x8086";
  flex["subsystem_device"] = "0x4905";
  fs::path flexDir = fake.addPci({"pci0000:00"}, "0000:05:00.0", flex, "i915");
  fake.write(flexDir / "drm/card1-DP-1/status", "disconnected");
  fake.write(flexDir / "drm/card1/lmem_total_bytes", "17179869184");
  fake.link("class/drm/card1", flexDir / "drm/card1");
}

const GpuRow* findRow(const Inventory& inventory, const std::string& id) {
  auto it = std::find_if(inventory.gpus.begin(), inventory.gpus.end(),
                         [&](const GpuRow& r) { return r.id == id; });
  return it == inventory.gpus.end() ? nullptr : &*it;
}

class GpuDetailsTest : public ::testing::Test {
 protected:
  void SetUp() override { buildThreeVendorNode(fake_); }
  Inventory discover() { return discoverInventory(registry_, fake_.roots()); }

  FakeSysfs fake_;
  device::DeviceRegistry registry_;
};

TEST_F(GpuDetailsTest, ListsEveryGpuOnceInBusOrder) {
  Inventory inventory = discover();
  std::vector<std::string> ids;
  for (const GpuRow& row : inventory.gpus) ids.push_back(row.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"pci-intel:0", "pci-nvidia:0", "pci-nvidia:1",
                                           "pci-amd:0", "pci-intel:1", "pci-intel:2"}));
  EXPECT_TRUE(inventory.notes.empty());
}

TEST_F(GpuDetailsTest, UnboundNvidiaGpuIsNamedByPciIdsAndSizedByItsBar) {
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-nvidia:0");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->placement.busId, "0000:01:00.0");
  EXPECT_EQ(row->model, "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(row->modelSource, "pci.ids");
  EXPECT_EQ(row->vramBytes, 128 * kGiB);
  EXPECT_EQ(row->vramSource, "pci-bar");
  EXPECT_TRUE(row->vramEstimated);
  EXPECT_EQ(row->driver, "");
  EXPECT_EQ(row->driverVersion, "");
  EXPECT_EQ(row->linkSpeed, "16.0 GT/s PCIe");
  EXPECT_EQ(row->linkWidth, 16);
  EXPECT_EQ(row->maxLinkSpeed, "32.0 GT/s PCIe");
  EXPECT_EQ(row->maxLinkWidth, 16);
  EXPECT_EQ(row->backend, "none");
}

TEST_F(GpuDetailsTest, NvidiaDriverNamesTheBoardAndGivesItsVersion) {
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-nvidia:1");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->model, "NVIDIA A100-SXM4-80GB");  // the driver's, over pci.ids' subsystem name
  EXPECT_EQ(row->modelSource, "nvidia");
  EXPECT_EQ(row->vramBytes, 128 * kGiB);
  EXPECT_EQ(row->vramSource, "pci-bar");
  EXPECT_TRUE(row->vramEstimated);
  EXPECT_EQ(row->driver, "nvidia");
  EXPECT_EQ(row->driverVersion, "550.54.14");  // procfs: no module version file here
  EXPECT_EQ(row->linkSpeed, "2.5 GT/s PCIe");
  EXPECT_EQ(row->maxLinkSpeed, "16.0 GT/s PCIe");
}

TEST_F(GpuDetailsTest, NvidiaModuleVersionFileWinsOverProcfs) {
  fake_.write("module/nvidia/version", "550.54.15");
  Inventory inventory = discover();
  EXPECT_EQ(findRow(inventory, "pci-nvidia:1")->driverVersion, "550.54.15");
}

TEST_F(GpuDetailsTest, AmdgpuGivesNameVramAndVersion) {
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-amd:0");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->model, "AMD Instinct MI300X OAM");
  EXPECT_EQ(row->modelSource, "amdgpu");
  EXPECT_EQ(row->vramBytes, 206141652992u);
  EXPECT_EQ(row->vramSource, "amdgpu");
  EXPECT_FALSE(row->vramEstimated);
  EXPECT_EQ(row->driver, "amdgpu");
  EXPECT_EQ(row->driverVersion, "6.7.0");
  EXPECT_EQ(row->maxLinkWidth, 16);
}

TEST_F(GpuDetailsTest, XeSumsItsTiles) {
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-intel:1");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->model, "Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]");
  EXPECT_EQ(row->modelSource, "pci.ids");
  EXPECT_EQ(row->vramBytes, 128 * kGiB);
  EXPECT_EQ(row->vramSource, "xe");
  EXPECT_FALSE(row->vramEstimated);
  EXPECT_EQ(row->driver, "xe");
  EXPECT_EQ(row->driverVersion, "");  // in-tree: no module version
}

TEST_F(GpuDetailsTest, I915DiscreteGpuReadsLmemFromItsDrmCard) {
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-intel:2");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->model, "Data Center GPU Flex 170");  // the subsystem's name
  EXPECT_EQ(row->modelSource, "pci.ids");
  EXPECT_EQ(row->vramBytes, 16 * kGiB);
  EXPECT_EQ(row->vramSource, "i915");
  EXPECT_EQ(row->driver, "i915");
}

TEST_F(GpuDetailsTest, IntegratedGpuWithNothingPublishedStaysUnknown) {
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-intel:0");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->model, "Intel device 0xa7a0");
  EXPECT_EQ(row->modelSource, "pci-id");
  EXPECT_EQ(row->vramBytes, 0u);
  EXPECT_EQ(row->vramSource, "");
  EXPECT_FALSE(row->vramEstimated);
  EXPECT_EQ(row->linkSpeed, "");
  EXPECT_EQ(row->linkWidth, 0);
  EXPECT_EQ(row->maxLinkSpeed, "");
  EXPECT_EQ(row->maxLinkWidth, 0);
}

TEST_F(GpuDetailsTest, RuntimeValuesKeepTheBackendAsTheirSource) {
  ASSERT_TRUE(registry_
                  .add(testing::describedDevice(device::Vendor::Nvidia, 0, "cuda",
                                                "NVIDIA H100 80GB HBM3", 80 * kGiB, "0000:01:00.0"))
                  .isOk());
  ASSERT_TRUE(
      registry_.add(testing::describedDevice(device::Vendor::Amd, 0, "hip", "", 0, "0000:03:00.0"))
          .isOk());
  ASSERT_TRUE(
      registry_.add(testing::describedDevice(device::Vendor::Amd, 5, "sim", "sim AMD", kGiB, ""))
          .isOk());
  Inventory inventory = discover();

  const GpuRow* cuda = findRow(inventory, "nvidia:0");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(cuda->modelSource, "cuda");
  EXPECT_EQ(cuda->vramBytes, 80 * kGiB);
  EXPECT_EQ(cuda->vramSource, "cuda");
  EXPECT_FALSE(cuda->vramEstimated);  // the BAR's figure did not replace the runtime's
  EXPECT_EQ(cuda->maxLinkSpeed, "32.0 GT/s PCIe");  // sysfs still gives the link

  const GpuRow* hip = findRow(inventory, "amd:0");  // a runtime that named nothing
  ASSERT_NE(hip, nullptr);
  EXPECT_EQ(hip->modelSource, "amdgpu");
  EXPECT_EQ(hip->vramSource, "amdgpu");
  EXPECT_EQ(hip->driverVersion, "6.7.0");

  const GpuRow* sim = findRow(inventory, "sim-amd:5");
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(sim->modelSource, "sim");
  EXPECT_EQ(sim->vramSource, "sim");
  EXPECT_EQ(sim->driverVersion, "");
}

TEST_F(GpuDetailsTest, JsonCarriesSourcesAndLinksWithNullsForUnknowns) {
  nlohmann::json doc = nlohmann::json::parse(inventoryToJson(discover()), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  const nlohmann::json& h100 = doc["gpus"][1];
  EXPECT_EQ(h100["id"], "pci-nvidia:0");
  EXPECT_EQ(h100["modelSource"], "pci.ids");
  EXPECT_EQ(h100["vramSource"], "pci-bar");
  EXPECT_EQ(h100["vramEstimated"], true);
  EXPECT_TRUE(h100["driver"].is_null());
  EXPECT_TRUE(h100["driverVersion"].is_null());
  EXPECT_EQ(h100["linkSpeed"], "16.0 GT/s PCIe");
  EXPECT_EQ(h100["linkWidth"], 16);
  EXPECT_EQ(h100["maxLinkSpeed"], "32.0 GT/s PCIe");
  EXPECT_EQ(h100["maxLinkWidth"], 16);
  const nlohmann::json& integrated = doc["gpus"][0];
  EXPECT_TRUE(integrated["vramBytes"].is_null());
  EXPECT_TRUE(integrated["vramSource"].is_null());
  EXPECT_EQ(integrated["vramEstimated"], false);
  EXPECT_TRUE(integrated["linkSpeed"].is_null());
  EXPECT_TRUE(integrated["maxLinkWidth"].is_null());
  EXPECT_EQ(doc["gpus"][3]["driverVersion"], "6.7.0");
  std::string table = formatInventoryTable(discover());
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 7) << table;
  EXPECT_NE(table.find("GH100 [H100 SXM5 80GB]"), std::string::npos) << table;
}

// Broken files: each GPU keeps what else it has, and the broken value is unknown.
TEST_F(GpuDetailsTest, GarbageAttributesGiveUnknownValues) {
  fake_.write("devices/pci0000:00/0000:01:00.0/resource", "garbage\n0x10 0x0f 0x2200\n0x1 0x2");
  fs::remove(fake_.sys() / "devices/pci0000:00/0000:03:00.0/mem_info_vram_total");
  fake_.makeUnreadable("devices/pci0000:00/0000:03:00.0/mem_info_vram_total");
  fs::remove(fake_.sys() / "devices/pci0000:00/0000:03:00.0/product_name");
  fake_.write("devices/pci0000:00/0000:04:00.0/tile0/physical_vram_size_bytes", "-5");
  fake_.write("devices/pci0000:00/0000:04:00.0/tile1/physical_vram_size_bytes", "lots");
  fake_.write("devices/pci0000:00/0000:05:00.0/drm/card1/lmem_total_bytes", "0x");
  fake_.write("devices/pci0000:00/0000:02:00.0/max_link_width", "255");
  fake_.writeProc("driver/nvidia/version", "NVRM version: no number here");
  Inventory inventory = discover();

  const GpuRow* h100 = findRow(inventory, "pci-nvidia:0");
  EXPECT_EQ(h100->vramBytes, 0u);
  EXPECT_EQ(h100->vramSource, "");
  EXPECT_FALSE(h100->vramEstimated);
  const GpuRow* a100 = findRow(inventory, "pci-nvidia:1");
  EXPECT_EQ(a100->driverVersion, "");
  EXPECT_EQ(a100->maxLinkWidth, 0);
  const GpuRow* mi300x = findRow(inventory, "pci-amd:0");
  EXPECT_EQ(mi300x->vramBytes, 0u);
  EXPECT_EQ(mi300x->vramSource, "");
  EXPECT_EQ(mi300x->model, "Aqua Vanjaram [Instinct MI300X]");  // pci.ids steps in
  EXPECT_EQ(mi300x->modelSource, "pci.ids");
  EXPECT_EQ(findRow(inventory, "pci-intel:1")->vramSource, "");
  EXPECT_EQ(findRow(inventory, "pci-intel:2")->vramSource, "");
}

TEST_F(GpuDetailsTest, NonNumericAmdVramIsUnknown) {
  fake_.write("devices/pci0000:00/0000:03:00.0/mem_info_vram_total", "192 GiB");
  Inventory inventory = discover();
  const GpuRow* row = findRow(inventory, "pci-amd:0");
  EXPECT_EQ(row->vramBytes, 0u);
  EXPECT_EQ(row->vramSource, "");
}

TEST_F(GpuDetailsTest, AbsentPciIdsFallsBackToTheBareIds) {
  fs::remove(fake_.roots().pciIds);
  Inventory inventory = discover();
  EXPECT_EQ(findRow(inventory, "pci-nvidia:0")->model, "NVIDIA device 0x2330");
  EXPECT_EQ(findRow(inventory, "pci-nvidia:0")->modelSource, "pci-id");
  EXPECT_EQ(findRow(inventory, "pci-intel:1")->model, "Intel device 0x0bd5");
  EXPECT_EQ(findRow(inventory, "pci-nvidia:1")->modelSource, "nvidia");  // the driver still names
}

TEST_F(GpuDetailsTest, PciIdsCutShortNamesWhatItStillHolds) {
  std::string text = kPciIds;
  fake_.writePciIds(text.substr(0, text.find("GH100") + 2));  // "\t2330  GH"
  Inventory inventory = discover();
  EXPECT_EQ(findRow(inventory, "pci-nvidia:0")->model, "NVIDIA device 0x2330");
  EXPECT_EQ(findRow(inventory, "pci-intel:1")->modelSource, "pci-id");
}

}  // namespace
}  // namespace hc::discovery
