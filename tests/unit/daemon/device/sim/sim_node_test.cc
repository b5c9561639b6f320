// addSimDevices(): a mixed-vendor node in the registry, its options reaching every device, and
// all-or-nothing refusal of bad counts and collisions.
#include "daemon/device/sim/sim_node.h"

#include <gtest/gtest.h>

#include <string>

namespace hc::device {
namespace {

TEST(SimNodeTest, AddsEachVendorsDevicesFromIndexZero) {
  DeviceRegistry registry = makeHostRegistry(nullptr);
  SimNodeOptions options;
  options.nvidia = 2;
  options.amd = 3;
  options.memoryBytes = 8ull << 30;
  ASSERT_TRUE(addSimDevices(registry, options, nullptr).isOk());
  EXPECT_EQ(registry.devices().size(), 1u + 2u + 3u);
  for (int i = 0; i < 2; ++i) {
    Result<Device*> d = registry.find(Vendor::Nvidia, i);
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ((*d)->info().backend, "sim");
    EXPECT_EQ((*d)->info().model, "simulated NVIDIA GPU");
    EXPECT_EQ((*d)->info().memoryBytes, 8ull << 30);
  }
  for (int i = 0; i < 3; ++i) {
    Result<Device*> d = registry.find(Vendor::Amd, i);
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ((*d)->info().model, "simulated AMD GPU");
  }
  EXPECT_FALSE(registry.find(Vendor::Nvidia, 2).isOk());
  EXPECT_FALSE(registry.find(Vendor::Amd, 3).isOk());
  const std::string described = registry.describe();
  EXPECT_NE(described.find("amd:2 backend=sim model=\"simulated AMD GPU\" memory=8.0 GiB "
                           "caps=[ipc,streams] transport=[]"),
            std::string::npos)
      << described;
}

TEST(SimNodeTest, NoDevicesIsFine) {
  DeviceRegistry registry;
  ASSERT_TRUE(addSimDevices(registry, SimNodeOptions{}, nullptr).isOk());
  EXPECT_TRUE(registry.devices().empty());
}

TEST(SimNodeTest, TheKernelFaultsAndTimingReachEveryDevice) {
  DeviceRegistry registry;
  SimNodeOptions options;
  options.nvidia = 1;
  options.amd = 1;
  options.faults.failCopyAt = 1;
  int reductions = 0;
  ASSERT_TRUE(addSimDevices(registry, options, [&reductions](const ReduceWork&, size_t, size_t) {
                ++reductions;
              }).isOk());
  for (const DevicePtr& device : registry.devices()) {
    EXPECT_TRUE(device->capabilities().reduceKernels);
    StreamId s = *device->createStream();
    int a = 1, b = 0;
    ASSERT_TRUE(device->copyAsync(s, &b, &a, sizeof(int)).isOk());
    Status status = device->synchronize(s);
    EXPECT_EQ(status.code(), Code::DeviceError) << "the first copy of each device faults";
    EXPECT_NE(status.message().find(std::string("sim ") + vendorName(device->info().vendor) + ":0"),
              std::string::npos)
        << status.message();
    EXPECT_TRUE(device->destroyStream(s).isOk());
    StreamId fresh = *device->createStream();
    const void* inputs[] = {&a};
    void* outputs[] = {&b};
    ASSERT_TRUE(
        device->reduceAsync(fresh, ReduceWork{Dtype::Int32, RedOp::Sum, inputs, outputs, {}, 1, 1})
            .isOk());
    EXPECT_TRUE(device->synchronize(fresh).isOk());
    EXPECT_TRUE(device->destroyStream(fresh).isOk());
  }
  EXPECT_EQ(reductions, 2);
}

TEST(SimNodeTest, RefusesBadCountsAndCollisionsWithoutAddingAnything) {
  DeviceRegistry registry;
  SimNodeOptions negative;
  negative.amd = -1;
  Status s = addSimDevices(registry, negative, nullptr);
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_NE(s.message().find("amd"), std::string::npos) << s.message();
  SimNodeOptions tooMany;
  tooMany.nvidia = kMaxSimDevicesPerVendor + 1;
  s = addSimDevices(registry, tooMany, nullptr);
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_NE(s.message().find("[0, 16]"), std::string::npos) << s.message();
  EXPECT_TRUE(registry.devices().empty());

  SimNodeOptions most;
  most.nvidia = kMaxSimDevicesPerVendor;
  ASSERT_TRUE(addSimDevices(registry, most, nullptr).isOk());
  EXPECT_EQ(registry.devices().size(), 16u);
  SimNodeOptions again;
  again.amd = 2;     // would be fine on its own
  again.nvidia = 1;  // nvidia:0 exists
  s = addSimDevices(registry, again, nullptr);
  EXPECT_EQ(s.code(), Code::InvalidArgument);
  EXPECT_NE(s.message().find("nvidia:0"), std::string::npos) << s.message();
  EXPECT_EQ(registry.devices().size(), 16u) << "no amd device was added either";
}

}  // namespace
}  // namespace hc::device
