// The inventory's table (parsed back by column offsets), JSON (parsed back) and log line.
#include "daemon/discovery/inventory_format.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon/device/host/host_device.h"
#include "tests/unit/daemon/discovery/fake_gpu_device.h"
#include "tests/unit/daemon/discovery/fake_sysfs.h"

namespace hc::discovery {
namespace {

using Row = std::map<std::string, std::string>;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Splits each line at the header's column offsets, as a script reading `hcctl devices` would.
// Fails the test when a cell does not start exactly at its column.
std::vector<Row> parseTable(const std::string& text) {
  std::vector<std::string> all = lines(text);
  EXPECT_FALSE(all.empty());
  if (all.empty()) return {};
  const std::string& header = all[0];
  std::vector<std::pair<std::string, size_t>> columns;  // name, offset
  for (size_t i = 0; i < header.size();) {
    size_t end = header.find(' ', i);
    if (end == std::string::npos) end = header.size();
    columns.push_back({header.substr(i, end - i), i});
    i = header.find_first_not_of(' ', end);
    if (i == std::string::npos) break;
  }
  std::vector<Row> rows;
  for (size_t l = 1; l < all.size(); ++l) {
    const std::string& line = all[l];
    EXPECT_NE(line.back(), ' ') << "trailing space: '" << line << "'";
    Row row;
    for (size_t c = 0; c < columns.size(); ++c) {
      size_t begin = columns[c].second;
      size_t end = c + 1 < columns.size() ? columns[c + 1].second : line.size();
      EXPECT_LT(begin, line.size()) << columns[c].first << " missing in '" << line << "'";
      if (begin >= line.size()) break;
      EXPECT_NE(line[begin], ' ') << columns[c].first << " misaligned in '" << line << "'";
      if (begin > 0) {
        EXPECT_EQ(line[begin - 1], ' ') << columns[c].first << " in '" << line << "'";
      }
      std::string cell = line.substr(begin, end - begin);
      cell.erase(cell.find_last_not_of(' ') + 1);
      row[columns[c].first] = cell;
    }
    rows.push_back(row);
  }
  return rows;
}

class InventoryFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::buildTypicalNode(fake_);
    ASSERT_TRUE(registry_.add(std::make_unique<device::HostDevice>(nullptr)).isOk());
    ASSERT_TRUE(
        registry_
            .add(testing::describedDevice(device::Vendor::Nvidia, 0, "cuda",
                                          "NVIDIA A100-SXM4-80GB", 80ull << 30, "00000000:3B:00.0"))
            .isOk());
    ASSERT_TRUE(registry_
                    .add(testing::describedDevice(device::Vendor::Nvidia, 1, "sim", "sim GPU",
                                                  1ull << 30, ""))
                    .isOk());
    inventory_ = discoverInventory(registry_, fake_.roots());
  }

  testing::FakeSysfs fake_;
  device::DeviceRegistry registry_;
  Inventory inventory_;
};

TEST_F(InventoryFormatTest, GpuTableHasEveryColumnAlignedAndParsesBack) {
  std::string table = formatInventoryTable(inventory_);
  EXPECT_EQ(lines(table)[0].substr(0, 2), "ID");
  std::vector<Row> rows = parseTable(table);
  ASSERT_EQ(rows.size(), inventory_.gpus.size());
  for (const Row& row : rows) {
    for (const char* column :
         {"ID", "VENDOR", "MODEL", "VRAM", "BACKEND", "PCI", "NUMA", "WEIGHT"}) {
      ASSERT_TRUE(row.count(column)) << column;
      EXPECT_FALSE(row.at(column).empty()) << column;
    }
  }
  EXPECT_EQ(rows[0].at("ID"), "nvidia:0");
  EXPECT_EQ(rows[0].at("MODEL"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(rows[0].at("VRAM"), "80.0 GiB");
  EXPECT_EQ(rows[0].at("BACKEND"), "cuda");
  EXPECT_EQ(rows[0].at("PCI"), "0000:3b:00.0");
  EXPECT_EQ(rows[0].at("NUMA"), "1");
  EXPECT_EQ(rows[0].at("WEIGHT"), "-");  // not measured
  EXPECT_EQ(rows[1].at("ID"), "sim-nvidia:1");
  EXPECT_EQ(rows[1].at("PCI"), "-");
  EXPECT_EQ(rows[1].at("NUMA"), "-");

  auto amd = std::find_if(rows.begin(), rows.end(),
                          [](const Row& r) { return r.at("ID") == "pci-amd:0"; });
  ASSERT_NE(amd, rows.end());
  EXPECT_EQ(amd->at("MODEL"), "AMD Instinct MI210");  // spaces inside a cell survive
  EXPECT_EQ(amd->at("VRAM"), "64.0 GiB");
  EXPECT_EQ(amd->at("BACKEND"), "none");
  EXPECT_EQ(amd->at("NUMA"), "0");
}

TEST_F(InventoryFormatTest, EmptyInventoryGivesTheHeaderAlone) {
  EXPECT_EQ(formatInventoryTable(Inventory{}),
            "ID  VENDOR  MODEL  VRAM  BACKEND  PCI  NUMA  WEIGHT\n");
}

TEST_F(InventoryFormatTest, NicAndRdmaTablesParseBack) {
  std::vector<Row> nics = parseTable(formatNicTable(inventory_));
  ASSERT_EQ(nics.size(), 4u);
  EXPECT_EQ(nics[0].at("NAME"), "ens1f0");
  EXPECT_EQ(nics[0].at("SPEED"), "100 Gb/s");
  EXPECT_EQ(nics[0].at("KIND"), "pci");
  EXPECT_EQ(nics[0].at("RDMA"), "mlx5_0");
  EXPECT_EQ(nics[2].at("NAME"), "lo");
  EXPECT_EQ(nics[2].at("KIND"), "loopback");
  EXPECT_EQ(nics[3].at("KIND"), "virtual");

  std::vector<Row> ports = parseTable(formatRdmaTable(inventory_));
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].at("RATE"), "100 Gb/sec (4X EDR)");
  EXPECT_EQ(ports[1].at("STATE"), "DOWN");
  EXPECT_EQ(ports[1].at("NETDEV"), "ens1f0");
}

TEST_F(InventoryFormatTest, JsonParsesBackWithNullsForUnknowns) {
  nlohmann::json doc = nlohmann::json::parse(inventoryToJson(inventory_), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  ASSERT_EQ(doc["gpus"].size(), inventory_.gpus.size());
  const nlohmann::json& a100 = doc["gpus"][0];
  EXPECT_EQ(a100["id"], "nvidia:0");
  EXPECT_EQ(a100["pciBusId"], "0000:3b:00.0");
  EXPECT_EQ(a100["numaNode"], 1);
  EXPECT_EQ(a100["vramBytes"], 80ull << 30);
  EXPECT_EQ(a100["nearestNics"], nlohmann::json::array({"ens1f0"}));
  EXPECT_EQ(a100["nicLocality"], "pcie-switch");
  const nlohmann::json& sim = doc["gpus"][1];
  EXPECT_TRUE(sim["pciBusId"].is_null());
  EXPECT_TRUE(sim["numaNode"].is_null());

  ASSERT_EQ(doc["nics"].size(), 4u);
  EXPECT_EQ(doc["nics"][0]["speedMbps"], 100000);
  EXPECT_TRUE(doc["nics"][1]["speedMbps"].is_null());  // eth0 "-1"
  EXPECT_EQ(doc["nics"][2]["isLoopback"], true);
  EXPECT_EQ(doc["rdmaDevices"][0]["ports"][0]["state"], "ACTIVE");
  EXPECT_EQ(doc["notes"].size(), 1u);
  EXPECT_EQ(inventoryToJson(inventory_, -1).find('\n'), std::string::npos);
}

TEST_F(InventoryFormatTest, SummaryIsOneLineNamingGpusNicsAndRdma) {
  std::string line = summarizeInventory(inventory_);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("6 GPUs [nvidia:0 cuda pci=0000:3b:00.0 numa=1, sim-nvidia:1 sim,"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("2 NICs [ens1f0 up 100 Gb/s numa=1 rdma=mlx5_0, eth0 up]"), std::string::npos)
      << line;
  EXPECT_NE(line.find("2 virtual interfaces"), std::string::npos) << line;
  EXPECT_NE(line.find("1 RDMA device [mlx5_0 1/2 ports active]"), std::string::npos) << line;
  EXPECT_NE(line.find("1 note"), std::string::npos) << line;
}

}  // namespace
}  // namespace hc::discovery
