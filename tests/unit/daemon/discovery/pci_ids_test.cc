// The pci.ids reader: the file's layout, and text that is cut short, garbled or hostile.
#include "daemon/discovery/pci_ids.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

// The layout of the real file, in small: a header comment, vendors with devices and subsystems,
// comments inside a vendor, and the class section after the last vendor.
constexpr const char* kSmallPciIds =
    "#\n"
    "#\tList of PCI ID's\n"
    "#\n"
    "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
    "\t74a1  Aqua Vanjaram [Instinct MI300X]\n"
    "10de  NVIDIA Corporation\n"
    "# a comment between devices\n"
    "\t20b2  GA100 [A100 SXM4 80GB]\n"
    "\t\t10de 1463  A100-SXM4-80GB\n"
    "\t\t10de 147f  A100-SXM4-80GB 500W\n"
    "\t2330  GH100 [H100 SXM5 80GB]\n"
    "8086  Intel Corporation\n"
    "\t0bd5  Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]\n"
    "\n"
    "# List of known device classes, subclasses and programming interfaces\n"
    "C 03  Display controller\n"
    "\t00  VGA compatible controller\n"
    "\t\t00  VGA controller\n"
    "\t0380  Not a device: a class line that looks like one\n"
    "C 12  Processing accelerators\n"
    "\t00  Processing accelerators\n";

std::optional<PciIdVendor> readVendor(const std::string& text, uint16_t vendorId) {
  std::istringstream in(text);
  return readPciIdVendor(in, vendorId);
}

TEST(PciIdsTest, ReadsOneVendorsDevicesAndSubsystems) {
  std::optional<PciIdVendor> nvidia = readVendor(kSmallPciIds, 0x10de);
  ASSERT_TRUE(nvidia.has_value());
  EXPECT_EQ(nvidia->name, "NVIDIA Corporation");
  ASSERT_EQ(nvidia->devices.size(), 2u);
  EXPECT_EQ(nvidia->devices.at(0x2330).name, "GH100 [H100 SXM5 80GB]");
  const PciIdVendor::Device& a100 = nvidia->devices.at(0x20b2);
  EXPECT_EQ(a100.name, "GA100 [A100 SXM4 80GB]");
  ASSERT_EQ(a100.subsystems.size(), 2u);
  EXPECT_EQ(a100.subsystems.at(0x10de1463u), "A100-SXM4-80GB");
  EXPECT_FALSE(readVendor(kSmallPciIds, 0x15b3).has_value());  // not listed
}

TEST(PciIdsTest, ClassSectionIsNotTakenAsDevices) {
  std::optional<PciIdVendor> intel = readVendor(kSmallPciIds, 0x8086);
  ASSERT_TRUE(intel.has_value());
  EXPECT_EQ(intel->devices.size(), 1u);
  EXPECT_EQ(intel->devices.count(0x0380), 0u);
  EXPECT_EQ(intel->devices.count(0x0000), 0u);
  // "C 03" is not vendor 0x0c03 either, nor anything after it a vendor.
  EXPECT_FALSE(readVendor(kSmallPciIds, 0x0c03).has_value());
  EXPECT_FALSE(
      readVendor(kSmallPciIds + std::string("abcd  After the classes\n"), 0xabcd).has_value());
}

TEST(PciIdsTest, CrlfLineEndsAreNotPartOfNames) {
  std::string crlf;
  for (char c : std::string(kSmallPciIds)) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  std::optional<PciIdVendor> nvidia = readVendor(crlf, 0x10de);
  ASSERT_TRUE(nvidia.has_value());
  EXPECT_EQ(nvidia->name, "NVIDIA Corporation");
  EXPECT_EQ(nvidia->devices.at(0x2330).name, "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(nvidia->devices.at(0x20b2).subsystems.at(0x10de147fu), "A100-SXM4-80GB 500W");
}

TEST(PciIdsTest, VeryLongLinesAreSkippedAndTheNextLineStillCounts) {
  std::string text = "10de  NVIDIA Corporation\n\t2331  " + std::string(4 << 20, 'x') +
                     "\n\t2330  GH100 [H100 SXM5 80GB]\n" + std::string(2 << 20, '\t') + "\n";
  std::optional<PciIdVendor> nvidia = readVendor(text, 0x10de);
  ASSERT_TRUE(nvidia.has_value());
  EXPECT_EQ(nvidia->devices.count(0x2331), 0u);
  EXPECT_EQ(nvidia->devices.at(0x2330).name, "GH100 [H100 SXM5 80GB]");
}

TEST(PciIdsTest, EntriesWithMissingFieldsAreSkipped) {
  std::optional<PciIdVendor> nvidia = readVendor(
      "10de  NVIDIA Corporation\n"
      "\t2331\n"                     // no name
      "\t2332   \t \n"               // a blank name
      "\tzzzz  Not hexadecimal\n"    // no id
      "\t233  Three digits\n"        // a short id
      "\t2334Name without a gap\n"   // nothing between id and name
      "\t2330  GH100\n"              // the one good entry
      "\t\t10de  No subdevice\n"     // a subsystem without its device id
      "\t\t10de 16c1\n"              // a subsystem without a name
      "\t\t\t10de 16c1  Too deep\n"  // no such level
      "\t2330  A second GH100\n",    // a duplicate: the first wins
      0x10de);
  ASSERT_TRUE(nvidia.has_value());
  ASSERT_EQ(nvidia->devices.size(), 1u);
  EXPECT_EQ(nvidia->devices.at(0x2330).name, "GH100");
  EXPECT_TRUE(nvidia->devices.at(0x2330).subsystems.empty());
}

TEST(PciIdsTest, SubsystemLinesBeforeAnyDeviceBelongToNone) {
  std::optional<PciIdVendor> nvidia =
      readVendor("10de  NVIDIA Corporation\n\t\t10de 16c1  Orphan\n\t2330  GH100\n", 0x10de);
  ASSERT_TRUE(nvidia.has_value());
  EXPECT_TRUE(nvidia->devices.at(0x2330).subsystems.empty());
}

TEST(PciIdsTest, FileCutShortMidLineDropsTheCutLine) {
  std::string text = kSmallPciIds;
  text = text.substr(0, text.find("GH100") + 3);  // "...\t2330  GH1"
  std::optional<PciIdVendor> nvidia = readVendor(text, 0x10de);
  ASSERT_TRUE(nvidia.has_value());
  EXPECT_EQ(nvidia->devices.count(0x2330), 0u);
  EXPECT_EQ(nvidia->devices.count(0x20b2), 1u);
}

TEST(PciIdsTest, BinaryNoiseNamesNothing) {
  std::string noise;
  for (int i = 0; i < 100000; ++i) noise += static_cast<char>((i * 7919) % 256);
  EXPECT_FALSE(readVendor(noise, 0x10de).has_value());
}

class PciIdDatabaseTest : public ::testing::Test {
 protected:
  testing::FakeSysfs fake_;
};

TEST_F(PciIdDatabaseTest, NamesDeviceOrSubsystem) {
  fake_.writePciIds(kSmallPciIds);
  PciIdDatabase ids(fake_.roots().pciIds);
  EXPECT_EQ(ids.name(0x10de, 0x2330), "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(ids.name(0x10de, 0x20b2, 0x10de, 0x1463), "A100-SXM4-80GB");
  EXPECT_EQ(ids.name(0x10de, 0x20b2, 0x10de, 0x9999), "GA100 [A100 SXM4 80GB]");  // unlisted
  EXPECT_EQ(ids.name(0x10de, 0x20b2), "GA100 [A100 SXM4 80GB]");
  EXPECT_EQ(ids.name(0x10de, 0x9999), "");
  EXPECT_EQ(ids.name(0x1af4, 0x1000), "");
  EXPECT_EQ(ids.name(0x1002, 0x74a1), "Aqua Vanjaram [Instinct MI300X]");
}

TEST_F(PciIdDatabaseTest, ReadsEachVendorOnceAndKeepsIt) {
  fake_.writePciIds(kSmallPciIds);
  PciIdDatabase ids(fake_.roots().pciIds);
  EXPECT_EQ(ids.name(0x10de, 0x2330), "GH100 [H100 SXM5 80GB]");
  std::filesystem::remove(fake_.roots().pciIds);
  EXPECT_EQ(ids.name(0x10de, 0x20b2), "GA100 [A100 SXM4 80GB]");  // from the kept section
  EXPECT_EQ(ids.name(0x8086, 0x0bd5), "");                        // read now: the file is gone
}

TEST_F(PciIdDatabaseTest, MissingOrUnreadableFileNamesNothing) {
  PciIdDatabase absent(fake_.roots().pciIds);
  EXPECT_EQ(absent.name(0x10de, 0x2330), "");
  std::filesystem::create_directories(fake_.roots().pciIds);
  PciIdDatabase directory(fake_.roots().pciIds);
  EXPECT_EQ(directory.name(0x10de, 0x2330), "");
  PciIdDatabase empty("");
  EXPECT_EQ(empty.name(0x10de, 0x2330), "");
}

TEST(PciIdsSystemTest, TheInstalledDatabaseNamesAnH100) {
  std::error_code ec;
  if (!std::filesystem::exists(kDebianPciIds, ec) && !std::filesystem::exists(kHwdataPciIds, ec)) {
    GTEST_SKIP() << "no pci.ids installed (Debian package pci.ids)";
  }
  PciIdDatabase ids(kDebianPciIds);
  EXPECT_NE(ids.name(0x10de, 0x2330).find("H100"), std::string::npos);
}

}  // namespace
}  // namespace hc::discovery
