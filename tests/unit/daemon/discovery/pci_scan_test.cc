// scanPciGpus over a fake sysfs: which functions are GPUs, and what is read from each.
#include "daemon/discovery/pci_scan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

const PciGpu* findGpu(const PciScan& scan, const std::string& busId) {
  auto it = std::find_if(scan.gpus.begin(), scan.gpus.end(),
                         [&](const PciGpu& g) { return g.placement.busId == busId; });
  return it == scan.gpus.end() ? nullptr : &*it;
}

class PciScanTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::buildTypicalNode(fake_); }
  testing::FakeSysfs fake_;
};

TEST_F(PciScanTest, ListsNvidiaAmdAndIntelGpusInBusOrder) {
  PciScan scan = scanPciGpus(fake_.roots());
  std::vector<std::string> busIds;
  for (const PciGpu& gpu : scan.gpus) busIds.push_back(gpu.placement.busId);
  EXPECT_EQ(busIds, (std::vector<std::string>{"0000:00:02.0", "0000:3b:00.0", "0000:5e:00.0",
                                              "0000:86:00.0", "0000:c1:00.0"}));
}

TEST_F(PciScanTest, ExcludesNonGpuFunctionsAndUnknownVendors) {
  PciScan scan = scanPciGpus(fake_.roots());
  EXPECT_EQ(findGpu(scan, "0000:3b:00.1"), nullptr);  // NVIDIA HD audio, class 0x0403
  EXPECT_EQ(findGpu(scan, "0000:00:04.0"), nullptr);  // ASPEED VGA: a display, not a GPU vendor
  EXPECT_EQ(findGpu(scan, "0000:00:01.0"), nullptr);  // Intel bridge
  EXPECT_EQ(findGpu(scan, "0000:c0:01.0"), nullptr);  // AMD (0x1022) bridge
  EXPECT_EQ(findGpu(scan, "0000:3c:00.0"), nullptr);  // Mellanox NIC
  EXPECT_EQ(findGpu(scan, "0000:00:05.0"), nullptr);  // vendor unreadable: noted, not guessed
  ASSERT_EQ(scan.notes.size(), 1u);
  EXPECT_NE(scan.notes[0].find("0000:00:05.0"), std::string::npos) << scan.notes[0];
  EXPECT_NE(scan.notes[0].find("vendor"), std::string::npos) << scan.notes[0];
}

TEST_F(PciScanTest, ReadsTheNvidiaDisplayGpuAndItsDriverDetails) {
  PciScan scan = scanPciGpus(fake_.roots());
  const PciGpu* gpu = findGpu(scan, "0000:3b:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->vendor, GpuVendor::Nvidia);
  EXPECT_EQ(gpu->vendorId, 0x10de);
  EXPECT_EQ(gpu->deviceId, 0x20b2);
  EXPECT_EQ(gpu->subsystemDeviceId, 0x1463);
  EXPECT_EQ(gpu->classCode, 0x030200u);
  EXPECT_EQ(gpu->placement.numaNode, 1);
  EXPECT_EQ(gpu->driver, "nvidia");
  EXPECT_EQ(gpu->model, "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(gpu->modelFromDriver);
  EXPECT_EQ(gpu->uuid, "GPU-8b2a5c6e-1f00-4c1e-9d2a-000000000001");
  EXPECT_EQ(gpu->vramBytes, 0u);  // the nvidia driver does not publish it
  EXPECT_EQ(gpu->linkSpeed, "16.0 GT/s PCIe");
  EXPECT_EQ(gpu->linkWidth, 16);
  EXPECT_EQ(gpu->localCpus, "16-31");
  EXPECT_EQ(gpu->placement.path.size(), 5u);
}

TEST_F(PciScanTest, ReadsAmdAcceleratorVramAndProductName) {
  PciScan scan = scanPciGpus(fake_.roots());
  const PciGpu* gpu = findGpu(scan, "0000:c1:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->vendor, GpuVendor::Amd);
  EXPECT_EQ(gpu->classCode, 0x120000u);
  EXPECT_EQ(gpu->vramBytes, 68702699520u);
  EXPECT_EQ(gpu->model, "AMD Instinct MI210");
  EXPECT_EQ(gpu->driver, "amdgpu");
  EXPECT_EQ(gpu->placement.numaNode, 0);
}

TEST_F(PciScanTest, ListsIntelGpuWithoutNumaNode) {
  PciScan scan = scanPciGpus(fake_.roots());
  const PciGpu* gpu = findGpu(scan, "0000:00:02.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->vendor, GpuVendor::Intel);
  EXPECT_EQ(gpu->placement.numaNode, -1);
  EXPECT_EQ(gpu->model, "Intel device 0x56a0");
  EXPECT_FALSE(gpu->modelFromDriver);
  EXPECT_EQ(gpu->driver, "i915");
}

TEST_F(PciScanTest, ToleratesGarbageAndMissingAttributes) {
  PciScan scan = scanPciGpus(fake_.roots());
  const PciGpu* garbage = findGpu(scan, "0000:5e:00.0");  // numa_node "garbage", no device file
  ASSERT_NE(garbage, nullptr);
  EXPECT_EQ(garbage->placement.numaNode, -1);
  EXPECT_EQ(garbage->deviceId, 0);
  EXPECT_EQ(garbage->model, "NVIDIA device 0x0000");
  EXPECT_TRUE(garbage->uuid.empty());  // no procfs information for it

  const PciGpu* unreadable = findGpu(scan, "0000:86:00.0");  // numa_node unreadable, unbound
  ASSERT_NE(unreadable, nullptr);
  EXPECT_EQ(unreadable->placement.numaNode, -1);
  EXPECT_EQ(unreadable->model, "NVIDIA device 0x2330");
  EXPECT_EQ(unreadable->driver, "");
  EXPECT_EQ(unreadable->subsystemVendorId, 0);
  EXPECT_EQ(unreadable->linkWidth, 0);
}

TEST(PciScanEmptyTest, MissingTreeIsAnEmptyScan) {
  testing::FakeSysfs fake;
  PciScan scan = scanPciGpus(fake.roots());
  EXPECT_TRUE(scan.gpus.empty());
  EXPECT_TRUE(scan.notes.empty());
}

TEST(PciScanClassTest, ClassesThatCountAsGpus) {
  EXPECT_TRUE(isGpuClass(0x030000));   // VGA
  EXPECT_TRUE(isGpuClass(0x030200));   // 3D controller
  EXPECT_TRUE(isGpuClass(0x038000));   // other display
  EXPECT_TRUE(isGpuClass(0x120000));   // processing accelerator
  EXPECT_FALSE(isGpuClass(0x120100));  // accelerator subclass 01: not one of ours
  EXPECT_FALSE(isGpuClass(0x040300));  // audio
  EXPECT_FALSE(isGpuClass(0x020000));  // Ethernet
  EXPECT_EQ(gpuVendorFromPciId(0x1022), std::nullopt);
  EXPECT_STREQ(gpuVendorName(GpuVendor::Amd), "amd");
}

}  // namespace
}  // namespace hc::discovery
