// The attribute readers, PCI address normalization, and locality between placements.
#include "daemon/discovery/sysfs_files.h"

#include <gtest/gtest.h>

#include "daemon/discovery/locality.h"
#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

using testing::FakeSysfs;

TEST(SysfsFilesTest, NormalizesEveryFormOfOnePciAddress) {
  EXPECT_EQ(normalizePciBusId("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalizePciBusId("3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalizePciBusId(" 0001:C1:1F.7\n"), "0001:c1:1f.7");
  EXPECT_EQ(normalizePciBusId("10000:00:00.0"), "10000:00:00.0");  // VMD domains are wider
}

TEST(SysfsFilesTest, RejectsWhatIsNotAPciAddress) {
  for (const char* text : {"", "pci0000:00", "0000:3b:00", "0000:3b:00.8", "0000:3b:20.0",
                           "0000:3bb:00.0", "virtio2", "0000:3b:00.0.1", "zz:00.0"}) {
    EXPECT_FALSE(normalizePciBusId(text).has_value()) << text;
    EXPECT_FALSE(isPciAddress(text)) << text;
  }
}

TEST(SysfsFilesTest, ParsesNumbersStrictly) {
  EXPECT_EQ(parseHex("0x10de"), 0x10deu);
  EXPECT_EQ(parseHex("030200"), 0x030200u);
  EXPECT_FALSE(parseHex("0x").has_value());
  EXPECT_FALSE(parseHex("0x10dg").has_value());
  EXPECT_EQ(parseDecimal("-1\n"), -1);
  EXPECT_FALSE(parseDecimal("garbage").has_value());
  EXPECT_FALSE(parseDecimal("12abc").has_value());
  EXPECT_FALSE(parseDecimal("").has_value());
}

TEST(SysfsFilesTest, MissingAndUnreadableAttributesReadAsNothing) {
  FakeSysfs fake;
  fake.write("a/value", "  42");
  fake.makeUnreadable("a/directory");
  EXPECT_EQ(readDecimal(fake.sys() / "a/value"), 42);
  EXPECT_EQ(readText(fake.sys() / "a/value"), "42");

  Result<std::string> absent = readAttribute(fake.sys() / "a/absent");
  ASSERT_FALSE(absent.isOk());
  EXPECT_EQ(absent.status().code(), Code::NotFound);
  EXPECT_FALSE(readAttribute(fake.sys() / "a/directory").isOk());
  EXPECT_EQ(readText(fake.sys() / "a/directory"), "");
  EXPECT_FALSE(readHex(fake.sys() / "a/directory").has_value());
  EXPECT_TRUE(listDirectory(fake.sys() / "nowhere").empty());
  EXPECT_EQ(linkBasename(fake.sys() / "a/value"), "");  // a file, not a link
}

TEST(LocalityTest, FollowsLinksUpToTheNearestPciFunction) {
  FakeSysfs fake;
  testing::buildTypicalNode(fake);
  // eth0's `device` is virtio2, a child of the PCI function.
  PciPlacement eth0 = pciPlacementOf(fake.sys() / "class/net/eth0/device");
  EXPECT_EQ(eth0.busId, "0000:00:03.0");
  EXPECT_EQ(eth0.numaNode, -1);
  EXPECT_EQ(eth0.path, (std::vector<std::string>{"pci0000:00", "0000:00:03.0"}));

  PciPlacement gpu = pciPlacementOf(fake.sys() / "bus/pci/devices/0000:3b:00.0");
  EXPECT_EQ(gpu.numaNode, 1);
  EXPECT_EQ(gpu.path, (std::vector<std::string>{"pci0000:00", "0000:00:01.0", "0000:39:00.0",
                                                "0000:3a:00.0", "0000:3b:00.0"}));

  EXPECT_FALSE(pciPlacementOf(fake.sys() / "class/net/lo").onPci());
  EXPECT_FALSE(pciPlacementOf(fake.sys() / "no/such/device").onPci());
}

TEST(LocalityTest, RanksPathsFromSharedSwitchToCrossSocket) {
  PciPlacement gpu{"0000:3b:00.0",
                   1,
                   {"pci0000:00", "0000:00:01.0", "0000:39:00.0", "0000:3a:00.0", "0000:3b:00.0"}};
  PciPlacement sameSwitch{
      "0000:3c:00.0",
      1,
      {"pci0000:00", "0000:00:01.0", "0000:39:00.0", "0000:3a:01.0", "0000:3c:00.0"}};
  PciPlacement otherRootPort{"0000:41:00.0", 1, {"pci0000:00", "0000:00:02.0", "0000:41:00.0"}};
  PciPlacement otherHostBridge{"0000:81:00.0", 1, {"pci0000:80", "0000:80:01.0", "0000:81:00.0"}};
  PciPlacement otherSocket{"0000:c1:00.0", 0, {"pci0000:c0", "0000:c0:01.0", "0000:c1:00.0"}};
  PciPlacement noNuma{"0000:d1:00.0", -1, {"pci0000:d0", "0000:d1:00.0"}};
  PciPlacement virtualNic;

  EXPECT_EQ(localityBetween(gpu, sameSwitch), Locality::SamePciSwitch);
  EXPECT_EQ(localityBetween(sameSwitch, gpu), Locality::SamePciSwitch);
  EXPECT_EQ(localityBetween(gpu, otherRootPort), Locality::SameHostBridge);
  EXPECT_EQ(localityBetween(gpu, otherHostBridge), Locality::SameNumaNode);
  EXPECT_EQ(localityBetween(gpu, otherSocket), Locality::CrossNumaNode);
  EXPECT_EQ(localityBetween(gpu, noNuma), Locality::Unknown);
  EXPECT_EQ(localityBetween(gpu, virtualNic), Locality::Unknown);
  // Two functions of one card share their root port: no CPU between them.
  PciPlacement fn0{"0000:5e:00.0", 0, {"pci0000:5d", "0000:5d:00.0", "0000:5e:00.0"}};
  PciPlacement fn1{"0000:5e:00.1", 0, {"pci0000:5d", "0000:5d:00.0", "0000:5e:00.1"}};
  EXPECT_EQ(localityBetween(fn0, fn1), Locality::SamePciSwitch);
  EXPECT_LT(Locality::SamePciSwitch, Locality::SameHostBridge);
  EXPECT_STREQ(localityName(Locality::CrossNumaNode), "cross-numa");
}

}  // namespace
}  // namespace hc::discovery
