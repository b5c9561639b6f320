// NodeInfo: what Control.GetNode reports, as plain C++. The server fills it once at startup from
// the configuration and the inventory (daemon/discovery), so this layer needs neither.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hc::control {

// A GPU's measured speed (hetero_comm.v1.DeviceSpeed has the meaning of each figure).
struct NodeGpuSpeed {
  bool measured = false;
  double h2dGBps = 0;
  double d2hGBps = 0;
  double reduceGBps = 0;
  double rateGBps = 0;
  double weight = 0;  // relative to the node's fastest measured GPU; 0 when not measured
  int64_t measuredUnixMs = 0;
  std::string note;  // why it is not measured
};

struct NodeGpu {
  std::string id;  // the inventory's id: "nvidia:0", "sim-amd:1", "pci-intel:0"
  std::string vendor;
  std::string model;
  uint64_t vramBytes = 0;  // 0 when unknown
  std::string backend;     // "cuda", "hip", "sim", "none"
  std::string pciBusId;    // "" when not on PCI
  int numaNode = -1;       // -1 when unknown
  std::string driver;
  std::string driverVersion;
  std::string modelSource;  // see hetero_comm.v1.Gpu
  std::string vramSource;
  bool vramEstimated = false;
  std::string linkSpeed;
  int linkWidth = 0;
  std::string maxLinkSpeed;
  int maxLinkWidth = 0;
  std::vector<std::string> nearestNics;
  std::string nicLocality;
  NodeGpuSpeed speed;
};

struct NodeNic {
  std::string name;
  std::string pciBusId;
  int numaNode = -1;
  int64_t speedMbps = -1;  // -1 when not reported
  std::string operState;
  bool isVirtual = false;
  std::string rdmaDevice;
};

struct NodeInfo {
  std::string version;
  bool builtWithCuda = false;
  bool builtWithHip = false;
  std::chrono::steady_clock::time_point startedSteady;  // uptime is measured from here
  std::chrono::system_clock::time_point startedWall;
  std::string hostname;
  std::vector<NodeGpu> gpus;
  std::vector<NodeNic> nics;
  std::vector<std::string> transports;  // [peer] ucx_transports, one entry per transport
  std::string peerAddress;              // "" without a peer listener
  std::string clientSocket;
  std::string configToml;
};

}  // namespace hc::control
