// DeviceRegistry: lookup by (vendor, index), duplicate and null rejection, and the log line.
#include "daemon/device/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

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

}  // namespace
}  // namespace hc::device
