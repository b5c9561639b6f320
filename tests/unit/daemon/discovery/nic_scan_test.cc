// scanNetwork over a fake sysfs: physical, virtual and loopback interfaces, and RDMA devices.
#include "daemon/discovery/nic_scan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

const Nic* findNic(const NetworkScan& scan, const std::string& name) {
  auto it = std::find_if(scan.nics.begin(), scan.nics.end(),
                         [&](const Nic& n) { return n.name == name; });
  return it == scan.nics.end() ? nullptr : &*it;
}

class NicScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::buildTypicalNode(fake_);
    scan_ = scanNetwork(fake_.roots());
  }
  testing::FakeSysfs fake_;
  NetworkScan scan_;
};

TEST_F(NicScanTest, ListsEveryInterfaceByNameAndSkipsPlainFiles) {
  std::vector<std::string> names;
  for (const Nic& nic : scan_.nics) names.push_back(nic.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ens1f0", "eth0", "lo", "veth0"}));
}

TEST_F(NicScanTest, PhysicalNicHasPciPlacementAndLinkDetails) {
  const Nic* nic = findNic(scan_, "ens1f0");
  ASSERT_NE(nic, nullptr);
  EXPECT_FALSE(nic->isVirtual);
  EXPECT_FALSE(nic->isLoopback);
  EXPECT_EQ(nic->operState, "up");
  EXPECT_EQ(nic->mtu, 9000);
  EXPECT_EQ(nic->speedMbps, 100000);
  EXPECT_EQ(nic->mac, "b8:59:9f:00:00:01");
  EXPECT_EQ(nic->driver, "mlx5_core");
  EXPECT_EQ(nic->placement.busId, "0000:3c:00.0");
  EXPECT_EQ(nic->placement.numaNode, 1);
  EXPECT_EQ(nic->rdmaDevice, "mlx5_0");
}

TEST_F(NicScanTest, VirtioNicIsPhysicalThroughItsParent) {
  const Nic* nic = findNic(scan_, "eth0");
  ASSERT_NE(nic, nullptr);
  EXPECT_FALSE(nic->isVirtual);
  EXPECT_EQ(nic->placement.busId, "0000:00:03.0");
  EXPECT_EQ(nic->placement.numaNode, -1);
  EXPECT_EQ(nic->speedMbps, -1);  // "-1": not reported
  EXPECT_EQ(nic->mtu, 1400);
  EXPECT_EQ(nic->rdmaDevice, "");
}

TEST_F(NicScanTest, VethIsVirtualAndLoopbackIsMarked) {
  const Nic* veth = findNic(scan_, "veth0");
  ASSERT_NE(veth, nullptr);
  EXPECT_TRUE(veth->isVirtual);
  EXPECT_FALSE(veth->isLoopback);
  EXPECT_FALSE(veth->placement.onPci());
  EXPECT_EQ(veth->speedMbps, 10000);
  EXPECT_EQ(veth->driver, "");

  const Nic* lo = findNic(scan_, "lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_TRUE(lo->isLoopback);
  EXPECT_TRUE(lo->isVirtual);
  EXPECT_EQ(lo->operState, "unknown");
  EXPECT_EQ(lo->mtu, 65536);
  EXPECT_EQ(lo->speedMbps, -1);  // absent
}

TEST_F(NicScanTest, RdmaDeviceHasBothPortsAndItsNetDevice) {
  ASSERT_EQ(scan_.rdmaDevices.size(), 1u);
  const RdmaDevice& device = scan_.rdmaDevices[0];
  EXPECT_EQ(device.name, "mlx5_0");
  EXPECT_EQ(device.placement.busId, "0000:3c:00.0");
  EXPECT_EQ(device.placement.numaNode, 1);
  EXPECT_EQ(device.netDevices, std::vector<std::string>{"ens1f0"});
  ASSERT_EQ(device.ports.size(), 2u);
  EXPECT_EQ(device.ports[0].number, 1);
  EXPECT_EQ(device.ports[0].state, "ACTIVE");
  EXPECT_TRUE(device.ports[0].active());
  EXPECT_EQ(device.ports[0].rate, "100 Gb/sec (4X EDR)");
  EXPECT_DOUBLE_EQ(device.ports[0].rateGbps, 100.0);
  EXPECT_EQ(device.ports[0].linkLayer, "InfiniBand");
  EXPECT_EQ(device.ports[1].number, 2);
  EXPECT_EQ(device.ports[1].state, "DOWN");
  EXPECT_FALSE(device.ports[1].active());
  EXPECT_EQ(device.ports[1].linkLayer, "Ethernet");
}

TEST(NicScanLoopbackTest, LoopbackIsRecognizedWithoutItsTypeAttribute) {
  testing::FakeSysfs fake;
  fake.addNet("lo", "", {{"flags", "0x9"}});  // IFF_UP | IFF_LOOPBACK
  fake.addNet("lo2", "", {{"flags", "0x1003"}});
  fake.addNet("dummy0", "", {});
  NetworkScan scan = scanNetwork(fake.roots());
  ASSERT_EQ(scan.nics.size(), 3u);
  EXPECT_FALSE(scan.nics[0].isLoopback);  // dummy0: no type, no flags, not named lo
  EXPECT_TRUE(scan.nics[1].isLoopback);   // lo, by flags
  EXPECT_FALSE(scan.nics[2].isLoopback);  // lo2, flags without IFF_LOOPBACK
  EXPECT_TRUE(scan.rdmaDevices.empty());
}

}  // namespace
}  // namespace hc::discovery
