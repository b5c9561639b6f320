// The node's network interfaces (/sys/class/net) and RDMA devices (/sys/class/infiniband), with
// their PCI placement, so that a GPU can be paired with the NIC nearest to it.
// Depends on hc_common only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/discovery/locality.h"
#include "daemon/discovery/sysfs_files.h"

namespace hc::discovery {

struct Nic {
  std::string name;        // "eth0", "ens1f0np0", "ib0", "lo"
  std::string operState;   // RFC 2863 as the kernel spells it: "up", "down", "unknown", ...
  int mtu = 0;             // 0 when not reported
  int64_t speedMbps = -1;  // -1 when not reported (link down, virtual devices, some VMs)
  std::string mac;         // "02:fc:00:00:00:01"; "" when the interface has none
  // No `device` link: software interfaces (veth, bridges, tun, ifb, loopback). They carry no
  // traffic off the node on their own and have no locality.
  bool isVirtual = false;
  bool isLoopback = false;  // listed so that nothing is hidden, but never a candidate NIC
  std::string driver;       // the `device`'s bound driver: "mlx5_core", "ice", "virtio_net"
  PciPlacement placement;   // empty for virtual interfaces
  std::string rdmaDevice;   // "mlx5_0" when an RDMA device lists this interface; else ""
};

struct RdmaPort {
  int number = 0;         // 1-based, as in ports/N
  std::string state;      // "ACTIVE", "DOWN", "INIT", ... (from "4: ACTIVE")
  std::string rate;       // "100 Gb/sec (4X EDR)"; "" when not reported
  double rateGbps = 0;    // the leading number of rate; 0 when not reported
  std::string linkLayer;  // "InfiniBand" or "Ethernet" (RoCE)

  bool active() const { return state == "ACTIVE"; }
};

struct RdmaDevice {
  std::string name;  // "mlx5_0"
  PciPlacement placement;
  std::vector<RdmaPort> ports;          // by port number
  std::vector<std::string> netDevices;  // interfaces of the same PCI function (device/net/*)
};

struct NetworkScan {
  std::vector<Nic> nics;                // by name
  std::vector<RdmaDevice> rdmaDevices;  // by name
};

// Reads <sys>/class/net and <sys>/class/infiniband and links each interface to the RDMA device
// that lists it. Never fails: missing trees and attributes leave fields at their "unknown" value.
NetworkScan scanNetwork(const SystemRoots& roots = {});

}  // namespace hc::discovery
