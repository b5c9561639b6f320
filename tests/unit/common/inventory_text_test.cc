// The inventory's shared text forms (common/inventory_text.h): units, and the GPU table hcctl
// prints from GetNode's rows. The daemon's tables built on them are checked, parsed back, in
// tests/unit/daemon/discovery/inventory_format_test.cc.
#include "common/inventory_text.h"

#include <gtest/gtest.h>

namespace hc {
namespace {

TEST(InventoryFormatUnitsTest, BytesAndSpeeds) {
  EXPECT_EQ(formatBytes(0), "-");
  EXPECT_EQ(formatBytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(formatBytes(68702699520ull), "64.0 GiB");
  EXPECT_EQ(formatSpeed(-1), "-");
  EXPECT_EQ(formatSpeed(100), "100 Mb/s");
  EXPECT_EQ(formatSpeed(2500), "2.5 Gb/s");
  EXPECT_EQ(formatSpeed(400000), "400 Gb/s");
}

TEST(GpuTableTest, UnknownsPrintAsDashesAndColumnsStartAtTheirHeaders) {
  const std::string table =
      formatGpuTable({{"nvidia:0", "nvidia", "H100 SXM", 80ull << 30, "cuda", "0000:3b:00.0", 1,
                       0.4567},
                      {"pci-intel:0", "intel", "", 0, "none", "", -1, 0},
                      {"pci-nvidia:0", "nvidia", "GH100", 128ull << 30, "none", "", -1, 0, true}});
  EXPECT_EQ(table,
            "ID            VENDOR  MODEL     VRAM        BACKEND  PCI           NUMA  WEIGHT\n"
            "nvidia:0      nvidia  H100 SXM  80.0 GiB    cuda     0000:3b:00.0  1     0.46\n"
            "pci-intel:0   intel   -         -           none     -             -     -\n"
            "pci-nvidia:0  nvidia  GH100     ~128.0 GiB  none     -             -     -\n");
}

TEST(GpuTableTest, NoRowsGiveTheHeaderAlone) {
  EXPECT_EQ(formatGpuTable({}), "ID  VENDOR  MODEL  VRAM  BACKEND  PCI  NUMA  WEIGHT\n");
}

}  // namespace
}  // namespace hc
