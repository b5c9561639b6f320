// A fake /sys (and /proc) in a private temporary directory, laid out like the kernel's: PCI
// functions under devices/<host bridge>/<bridges>/, reached through bus/pci/devices and class/*
// links with relative targets, so that discovery walks it exactly as it walks the real tree.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "daemon/discovery/sysfs_files.h"
#include "tests/support/temp_dir.h"

namespace hc::discovery::testing {

using Attributes = std::map<std::string, std::string>;  // file name -> content (newline added)

class FakeSysfs {
 public:
  FakeSysfs();  // a fresh hc-discovery-* folder; throws if it cannot be made (tests only)
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  // pciIds is <root>/pci.ids, absent until writePciIds: the host's database never leaks in.
  SystemRoots roots() const { return {root_ / "sys", root_ / "proc", root_ / "pci.ids"}; }
  std::filesystem::path sys() const { return root_ / "sys"; }
  std::filesystem::path proc() const { return root_ / "proc"; }
  // Writes `text` as it is (no newline added) to <root>/pci.ids.
  void writePciIds(const std::string& text) const;

  // Writes text + "\n" to <sys>/relative, creating folders.
  void write(const std::filesystem::path& relative, const std::string& text) const;
  void writeProc(const std::filesystem::path& relative, const std::string& text) const;
  // <sys>/relative becomes a folder: reading it as an attribute fails (EISDIR), even as root.
  void makeUnreadable(const std::filesystem::path& relative) const;
  // <sys>/linkRelative -> <sys>/targetRelative, stored as a relative target like the kernel's.
  void link(const std::filesystem::path& linkRelative,
            const std::filesystem::path& targetRelative) const;

  // A PCI function devices/<parents...>/<busId> with `attributes`, listed in bus/pci/devices,
  // bound to `driver` when not empty. Returns its folder relative to <sys>.
  std::filesystem::path addPci(const std::vector<std::string>& parents, const std::string& busId,
                               const Attributes& attributes, const std::string& driver = "") const;
  // A network interface. With a `parent` (a device folder relative to <sys>) it lives in
  // <parent>/net/<name> with a `device` link to the parent; without one it is virtual
  // (devices/virtual/net/<name>, no `device` link).
  void addNet(const std::string& name, const std::filesystem::path& parent,
              const Attributes& attributes) const;
  // An RDMA device <pciDir>/infiniband/<name>, listed in class/infiniband, with ports/N/*.
  void addRdma(const std::string& name, const std::filesystem::path& pciDir,
               const std::vector<Attributes>& ports) const;

 private:
  test::TempDir dir_;  // removes the whole tree when the fake goes
  std::filesystem::path root_;
};

// The node most tests use:
//   pci0000:00 ── 0000:00:01.0 root port ── 0000:39:00.0 switch up ─┬ 0000:3a:00.0 ── 0000:3b:00.0
//             │                                                      │   NVIDIA A100 (NUMA 1), and
//             │                                                      │   its audio function .1
//             │                                                      └ 0000:3a:01.0 ── 0000:3c:00.0
//             │                                                          NIC ens1f0 + mlx5_0 (NUMA
//             1) ├ 0000:00:02.0 Intel GPU (numa_node -1) ├ 0000:00:03.0 virtio ── virtio2 ── eth0
//             ├ 0000:00:04.0 ASPEED VGA (unknown vendor)
//             ├ 0000:00:05.0 vendor unreadable
//             ├ 0000:5e:00.0 NVIDIA, numa_node "garbage", no device id
//             └ 0000:86:00.0 NVIDIA, numa_node unreadable, no subsystem ids, unbound
//   pci0000:c0 ── 0000:c0:01.0 ── 0000:c1:00.0 AMD Instinct MI210 accelerator (NUMA 0, 64 GiB)
//   virtual: lo, veth0; class/net/bonding_masters (a plain file)
void buildTypicalNode(const FakeSysfs& fake);

}  // namespace hc::discovery::testing
