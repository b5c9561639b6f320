#include "tests/unit/daemon/discovery/fake_sysfs.h"

#include <fstream>

namespace hc::discovery::testing {
namespace fs = std::filesystem;

FakeSysfs::FakeSysfs() : dir_("hc-discovery"), root_(dir_.path()) {
  fs::create_directories(root_ / "sys");
  fs::create_directories(root_ / "proc");
}

void FakeSysfs::write(const fs::path& relative, const std::string& text) const {
  fs::path full = sys() / relative;
  fs::create_directories(full.parent_path());
  std::ofstream(full) << text << "\n";
}

void FakeSysfs::writeProc(const fs::path& relative, const std::string& text) const {
  fs::path full = proc() / relative;
  fs::create_directories(full.parent_path());
  std::ofstream(full) << text << "\n";
}

void FakeSysfs::writePciIds(const std::string& text) const {
  std::ofstream(root_ / "pci.ids", std::ios::binary) << text;
}

void FakeSysfs::makeUnreadable(const fs::path& relative) const {
  fs::create_directories(sys() / relative);
}

void FakeSysfs::link(const fs::path& linkRelative, const fs::path& targetRelative) const {
  fs::path linkPath = sys() / linkRelative;
  fs::create_directories(linkPath.parent_path());
  fs::create_directories(sys() / targetRelative);
  fs::create_directory_symlink(fs::relative(sys() / targetRelative, linkPath.parent_path()),
                               linkPath);
}

fs::path FakeSysfs::addPci(const std::vector<std::string>& parents, const std::string& busId,
                           const Attributes& attributes, const std::string& driver) const {
  fs::path dir = "devices";
  for (const std::string& parent : parents) dir /= parent;
  dir /= busId;
  fs::create_directories(sys() / dir);
  for (const auto& [name, text] : attributes) write(dir / name, text);
  link(fs::path("bus/pci/devices") / busId, dir);
  if (!driver.empty()) link(dir / "driver", fs::path("bus/pci/drivers") / driver);
  return dir;
}

void FakeSysfs::addNet(const std::string& name, const fs::path& parent,
                       const Attributes& attributes) const {
  fs::path dir = parent.empty() ? fs::path("devices/virtual/net") / name : parent / "net" / name;
  fs::create_directories(sys() / dir);
  for (const auto& [file, text] : attributes) write(dir / file, text);
  if (!parent.empty()) link(dir / "device", parent);
  link(fs::path("class/net") / name, dir);
}

void FakeSysfs::addRdma(const std::string& name, const fs::path& pciDir,
                        const std::vector<Attributes>& ports) const {
  fs::path dir = pciDir / "infiniband" / name;
  for (size_t i = 0; i < ports.size(); ++i) {
    for (const auto& [file, text] : ports[i]) {
      write(dir / "ports" / std::to_string(i + 1) / file, text);
    }
  }
  link(dir / "device", pciDir);
  link(fs::path("class/infiniband") / name, dir);
}

void buildTypicalNode(const FakeSysfs& fake) {
  const std::vector<std::string> rootPort = {"pci0000:00", "0000:00:01.0"};
  const Attributes bridge = {
      {"vendor", "0x8086"}, {"device", "0x2030"}, {"class", "0x060400"}, {"numa_node", "1"}};
  fake.addPci({"pci0000:00"}, "0000:00:01.0", bridge, "pcieport");
  fake.addPci(rootPort, "0000:39:00.0", bridge, "pcieport");
  fake.addPci({"pci0000:00", "0000:00:01.0", "0000:39:00.0"}, "0000:3a:00.0", bridge, "pcieport");
  fake.addPci({"pci0000:00", "0000:00:01.0", "0000:39:00.0"}, "0000:3a:01.0", bridge, "pcieport");

  const std::vector<std::string> gpuPorts = {"pci0000:00", "0000:00:01.0", "0000:39:00.0",
                                             "0000:3a:00.0"};
  fake.addPci(gpuPorts, "0000:3b:00.0",
              {{"vendor", "0x10de"},
               {"device", "0x20b2"},
               {"class", "0x030200"},
               {"numa_node", "1"},
               {"subsystem_vendor", "0x10de"},
               {"subsystem_device", "0x1463"},
               {"current_link_speed", "16.0 GT/s PCIe"},
               {"current_link_width", "16"},
               {"local_cpulist", "16-31"}},
              "nvidia");
  fake.writeProc("driver/nvidia/gpus/0000:3b:00.0/information",
                 "Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 180\n"
                 "GPU UUID: \t GPU-8b2a5c6e-1f00-4c1e-9d2a-000000000001\n"
                 "Bus Location: \t 0000:3b:00.0");
  fake.addPci(
      gpuPorts, "0000:3b:00.1",
      {{"vendor", "0x10de"}, {"device", "0x1aef"}, {"class", "0x040300"}, {"numa_node", "1"}},
      "snd_hda_intel");

  fs::path nicPci = fake.addPci(
      {"pci0000:00", "0000:00:01.0", "0000:39:00.0", "0000:3a:01.0"}, "0000:3c:00.0",
      {{"vendor", "0x15b3"}, {"device", "0x101b"}, {"class", "0x020700"}, {"numa_node", "1"}},
      "mlx5_core");
  fake.addNet("ens1f0", nicPci,
              {{"operstate", "up"},
               {"mtu", "9000"},
               {"speed", "100000"},
               {"address", "b8:59:9f:00:00:01"},
               {"type", "1"}});
  fake.addRdma(
      "mlx5_0", nicPci,
      {{{"state", "4: ACTIVE"}, {"rate", "100 Gb/sec (4X EDR)"}, {"link_layer", "InfiniBand"}},
       {{"state", "1: DOWN"}, {"rate", "10 Gb/sec (4X SDR)"}, {"link_layer", "Ethernet"}}});

  fake.addPci(
      {"pci0000:00"}, "0000:00:02.0",
      {{"vendor", "0x8086"}, {"device", "0x56a0"}, {"class", "0x030000"}, {"numa_node", "-1"}},
      "i915");
  fs::path virtioPci = fake.addPci(
      {"pci0000:00"}, "0000:00:03.0",
      {{"vendor", "0x1af4"}, {"device", "0x1000"}, {"class", "0x020000"}, {"numa_node", "-1"}},
      "virtio-pci");
  fake.addNet("eth0", virtioPci / "virtio2",
              {{"operstate", "up"},
               {"mtu", "1400"},
               {"speed", "-1"},
               {"address", "02:fc:00:00:00:01"},
               {"type", "1"}});
  fake.addPci({"pci0000:00"}, "0000:00:04.0",
              {{"vendor", "0x1a03"}, {"device", "0x2000"}, {"class", "0x030000"}}, "ast");
  fs::path unreadable = fake.addPci({"pci0000:00"}, "0000:00:05.0", {{"class", "0x030000"}});
  fake.makeUnreadable(unreadable / "vendor");

  fake.addPci({"pci0000:00"}, "0000:5e:00.0",
              {{"vendor", "0x10de"}, {"class", "0x030200"}, {"numa_node", "garbage"}}, "nvidia");
  fs::path noNuma =
      fake.addPci({"pci0000:00"}, "0000:86:00.0",
                  {{"vendor", "0x10de"}, {"device", "0x2330"}, {"class", "0x030200"}});
  fake.makeUnreadable(noNuma / "numa_node");

  fake.addPci(
      {"pci0000:c0"}, "0000:c0:01.0",
      {{"vendor", "0x1022"}, {"device", "0x1483"}, {"class", "0x060400"}, {"numa_node", "0"}},
      "pcieport");
  fake.addPci({"pci0000:c0", "0000:c0:01.0"}, "0000:c1:00.0",
              {{"vendor", "0x1002"},
               {"device", "0x740f"},
               {"class", "0x120000"},
               {"numa_node", "0"},
               {"mem_info_vram_total", "68702699520"},
               {"product_name", "AMD Instinct MI210"}},
              "amdgpu");

  fake.addNet("lo", "",
              {{"operstate", "unknown"},
               {"mtu", "65536"},
               {"address", "00:00:00:00:00:00"},
               {"type", "772"}});
  fake.addNet("veth0", "",
              {{"operstate", "up"},
               {"mtu", "1500"},
               {"speed", "10000"},
               {"address", "9a:9c:0e:3a:9b:f8"},
               {"type", "1"}});
  fake.write("class/net/bonding_masters", "");
}

}  // namespace hc::discovery::testing
