// DeviceRegistry: lookup by (vendor, index) and by PCI address, duplicate and null rejection, the
// log line, and the one reading of PCI address text.
#include "daemon/device/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "daemon/device/host/host_device.h"
#include "tests/unit/daemon/discovery/fake_gpu_device.h"

namespace hc::device {
namespace {

TEST(DeviceRegistryTest, HostRegistryHoldsOneHostDevice) {
  DeviceRegistry registry = makeHostRegistry(nullptr);
  ASSERT_EQ(registry.devices().size(), 1u);
  Result<Device*> host = registry.find(Vendor::Host, 0);
  ASSERT_TRUE(host.isOk()) << host.status().toString();
  EXPECT_EQ(*host, registry.devices()[0].get());
  EXPECT_EQ((*host)->info().backend, "host");
}

TEST(DeviceRegistryTest, FindNamesTheDevicesThatExist) {
  DeviceRegistry registry = makeHostRegistry(nullptr);
  Result<Device*> gpu = registry.find(Vendor::Nvidia, 0);
  ASSERT_FALSE(gpu.isOk());
  EXPECT_EQ(gpu.status().code(), Code::NotFound);
  EXPECT_NE(gpu.status().message().find("nvidia:0"), std::string::npos);
  EXPECT_NE(gpu.status().message().find("host:0"), std::string::npos);
  EXPECT_EQ(registry.find(Vendor::Host, 1).status().code(), Code::NotFound);

  DeviceRegistry empty;
  EXPECT_NE(empty.find(Vendor::Host, 0).status().message().find("none"), std::string::npos);
  EXPECT_EQ(empty.describe(), "no devices\n");
}

TEST(DeviceRegistryTest, RejectsNullAndDuplicateDevices) {
  DeviceRegistry registry;
  EXPECT_EQ(registry.add(nullptr).code(), Code::InvalidArgument);
  ASSERT_TRUE(registry.add(std::make_unique<HostDevice>(nullptr, 0)).isOk());
  Status dup = registry.add(std::make_unique<HostDevice>(nullptr, 0));
  EXPECT_EQ(dup.code(), Code::InvalidArgument);
  EXPECT_NE(dup.message().find("host:0"), std::string::npos);
  ASSERT_TRUE(registry.add(std::make_unique<HostDevice>(nullptr, 1)).isOk());
  EXPECT_EQ(registry.devices().size(), 2u);
  Result<Device*> second = registry.find(Vendor::Host, 1);
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ((*second)->info().index, 1);
}

TEST(DeviceRegistryTest, DescribeGivesOneLinePerDevice) {
  DeviceRegistry registry;
  ASSERT_TRUE(registry.add(std::make_unique<HostDevice>(nullptr, 0)).isOk());
  ASSERT_TRUE(
      registry.add(std::make_unique<HostDevice>([](const ReduceWork&, size_t, size_t) {}, 1))
          .isOk());
  std::string text = registry.describe();
  EXPECT_NE(text.find("host:0 backend=host"), std::string::npos) << text;
  EXPECT_NE(text.find("host:1 backend=host"), std::string::npos) << text;
  EXPECT_NE(text.find("caps=[] transport=[host]"), std::string::npos) << text;
  EXPECT_NE(text.find("caps=[reduce] transport=[host]"), std::string::npos) << text;
  EXPECT_NE(text.find(" GiB"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST(PciAddressTest, ParsesBusIdsAsDriversAndSysfsSpellThem) {
  // Expected values packed by hand: domain << 16 | bus << 8 | device << 3 | function.
  Result<uint32_t> lower = parsePciAddress("0000:3b:00.0");
  ASSERT_TRUE(lower.isOk()) << lower.status().toString();
  EXPECT_EQ(*lower, 0x00003b00u);
  Result<uint32_t> upper = parsePciAddress("0000:C1:00.0");  // CUDA and HIP print upper case
  ASSERT_TRUE(upper.isOk());
  EXPECT_EQ(*upper, 0x0000c100u);
  Result<uint32_t> noDomain = parsePciAddress("3b:1f.7");
  ASSERT_TRUE(noDomain.isOk());
  EXPECT_EQ(*noDomain, 0x00003bffu);  // 0x1f << 3 | 7 = 0xff
  Result<uint32_t> wide = parsePciAddress("abcd:01:02.3");
  ASSERT_TRUE(wide.isOk());
  EXPECT_EQ(*wide, 0xabcd0113u);  // 2 << 3 | 3 = 0x13
}

TEST(PciAddressTest, RefusesWhatIsNotAnAddress) {
  for (const char* bad : {"", "3b", "3b:00", "0000:3b:00", "0000:3b:00.", "0000:3b:00.8",
                          "0000:3b:20.0", "10000:3b:00.0", "0000:13b:00.0", "0000:3b:000.0",
                          "0000:3b:00.00", "0000:3g:00.0", " 0000:3b:00.0", "0000:3b:00.0\n",
                          "0:0:3b:00.0", "0000::00.0", "+000:3b:00.0", "0x00:3b:00.0"}) {
    Result<uint32_t> parsed = parsePciAddress(bad);
    EXPECT_FALSE(parsed.isOk()) << "\"" << bad << "\" parsed as " << (parsed.isOk() ? *parsed : 0);
    if (!parsed.isOk()) {
      EXPECT_EQ(parsed.status().code(), Code::InvalidArgument);
      EXPECT_NE(parsed.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
          << parsed.status().message();
    }
  }
}

TEST(PciAddressTest, FormatsLowerCaseAndRoundTrips) {
  EXPECT_EQ(formatPciAddress(0x00003b00u), "0000:3b:00.0");
  EXPECT_EQ(formatPciAddress(0xabcd0113u), "abcd:01:02.3");
  for (uint32_t address : {0u, 0x00003b00u, 0x0000c108u, 0xffffffffu, 0x12345678u}) {
    Result<uint32_t> back = parsePciAddress(formatPciAddress(address));
    ASSERT_TRUE(back.isOk()) << formatPciAddress(address);
    EXPECT_EQ(*back, address);
  }
}

TEST(PciAddressTest, SimDevicesHaveSyntheticAddressesAndTheHostNone) {
  DeviceInfo sim;
  sim.backend = "sim";
  sim.vendor = Vendor::Nvidia;
  sim.index = 3;
  EXPECT_EQ(pciAddressOf(sim), 0xff010300u);  // "ff01:03:00.0": domain ff00 + nvidia (1)
  sim.vendor = Vendor::Amd;
  EXPECT_EQ(pciAddressOf(sim), 0xff020300u);
  sim.index = 256;
  EXPECT_EQ(pciAddressOf(sim), std::nullopt) << "past the bus numbers";
  DeviceInfo gpu;
  gpu.backend = "cuda";
  gpu.vendor = Vendor::Nvidia;
  gpu.pciBusId = "0000:3b:00.0";
  EXPECT_EQ(pciAddressOf(gpu), 0x00003b00u);
  gpu.pciBusId = "garbage";
  EXPECT_EQ(pciAddressOf(gpu), std::nullopt);
  gpu.pciBusId = "";
  EXPECT_EQ(pciAddressOf(gpu), std::nullopt) << "only sim devices get a synthetic address";
  EXPECT_EQ(pciAddressOf(DeviceInfo{}), std::nullopt);
}

TEST(DeviceRegistryTest, FindsByPciAddressWithinTheVendor) {
  using discovery::testing::describedDevice;
  DeviceRegistry registry;
  ASSERT_TRUE(
      registry.add(describedDevice(Vendor::Nvidia, 0, "cuda", "A", 1, "0000:3B:00.0")).isOk());
  ASSERT_TRUE(
      registry.add(describedDevice(Vendor::Nvidia, 1, "cuda", "B", 1, "0000:5e:00.0")).isOk());
  ASSERT_TRUE(registry.add(describedDevice(Vendor::Amd, 0, "hip", "C", 1, "0000:5e:00.0")).isOk());
  ASSERT_TRUE(registry.add(describedDevice(Vendor::Nvidia, 2, "cuda", "D", 1, "")).isOk());

  Result<Device*> second = registry.findByPciAddress(Vendor::Nvidia, 0x00005e00u);
  ASSERT_TRUE(second.isOk()) << second.status().toString();
  EXPECT_EQ((*second)->info().index, 1);
  Result<Device*> amd = registry.findByPciAddress(Vendor::Amd, 0x00005e00u);
  ASSERT_TRUE(amd.isOk());
  EXPECT_EQ((*amd)->info().vendor, Vendor::Amd);
  Result<Device*> first = registry.findByPciAddress(Vendor::Nvidia, 0x00003b00u);
  ASSERT_TRUE(first.isOk()) << "upper-case bus ids match too";
  EXPECT_EQ((*first)->info().index, 0);

  Result<Device*> missing = registry.findByPciAddress(Vendor::Nvidia, 0x0000c100u);
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), Code::NotFound);
  const std::string text = missing.status().message();
  EXPECT_NE(text.find("0000:c1:00.0"), std::string::npos) << text;
  EXPECT_NE(text.find("nvidia:0 at 0000:3b:00.0"), std::string::npos) << text;
  EXPECT_NE(text.find("nvidia:1 at 0000:5e:00.0"), std::string::npos) << text;
  EXPECT_NE(text.find("nvidia:2 at no PCI address"), std::string::npos) << text;
  EXPECT_EQ(text.find("amd"), std::string::npos) << "other vendors are not candidates: " << text;
  EXPECT_EQ(registry.findByPciAddress(Vendor::Host, 0).status().code(), Code::NotFound);
}

}  // namespace
}  // namespace hc::device
