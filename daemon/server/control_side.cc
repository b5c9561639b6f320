#include "daemon/server/control_side.h"

#include <unistd.h>

#include <limits.h>

#include <spdlog/spdlog.h>

#include "daemon/discovery/inventory.h"

namespace hc::server {
namespace {

std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    if (!item.empty()) out.push_back(std::move(item));
    begin = end + 1;
  }
  return out;
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return {};
  return name;
}

control::NodeGpu nodeGpuOf(const discovery::GpuRow& gpu) {
  control::NodeGpu out;
  out.id = gpu.id;
  out.vendor = gpu.vendor;
  out.model = gpu.model;
  out.vramBytes = gpu.vramBytes;
  out.backend = gpu.backend;
  out.pciBusId = gpu.placement.busId;
  out.numaNode = gpu.placement.numaNode;
  out.driver = gpu.driver;
  out.driverVersion = gpu.driverVersion;
  out.modelSource = gpu.modelSource;
  out.vramSource = gpu.vramSource;
  out.vramEstimated = gpu.vramEstimated;
  out.linkSpeed = gpu.linkSpeed;
  out.linkWidth = gpu.linkWidth;
  out.maxLinkSpeed = gpu.maxLinkSpeed;
  out.maxLinkWidth = gpu.maxLinkWidth;
  out.nearestNics = gpu.nearestNics;
  out.nicLocality = gpu.nearestNics.empty() ? "" : discovery::localityName(gpu.nicLocality);
  const discovery::DeviceSpeed& speed = gpu.speed;
  out.speed = {speed.measured,  speed.h2dGBps, speed.d2hGBps,        speed.reduceGBps,
               speed.rateGBps,  speed.weight,  speed.measuredUnixMs, speed.note};
  return out;
}

std::vector<control::NodeGpu> nodeGpusOf(const std::vector<discovery::GpuRow>& gpus) {
  std::vector<control::NodeGpu> out;
  out.reserve(gpus.size());
  for (const discovery::GpuRow& gpu : gpus) out.push_back(nodeGpuOf(gpu));
  return out;
}

control::NodeInfo describeNode(const config::DaemonConfig& config,
                               const discovery::Inventory& inventory,
                               const std::string& peerAddress) {
  control::NodeInfo node;
  node.version = HC_VERSION;
#if defined(HC_HAVE_CUDA)
  node.builtWithCuda = true;
#endif
#if defined(HC_HAVE_HIP)
  node.builtWithHip = true;
#endif
  node.startedSteady = std::chrono::steady_clock::now();
  node.startedWall = std::chrono::system_clock::now();
  node.hostname = hostname();
  for (const discovery::GpuRow& gpu : inventory.gpus) node.gpus.push_back(nodeGpuOf(gpu));
  for (const discovery::Nic& nic : inventory.nics) {
    if (nic.isLoopback) continue;  // never a candidate NIC; it would only pad the listing
    node.nics.push_back({nic.name, nic.placement.busId, nic.placement.numaNode, nic.speedMbps,
                         nic.operState, nic.isVirtual, nic.rdmaDevice});
  }
  node.transports = splitCommas(config.peerUcxTransports);
  node.peerAddress = peerAddress;
  node.clientSocket = config.socketPath;
  node.configToml = config::toToml(config);
  return node;
}

}  // namespace

Result<std::unique_ptr<ControlSide>> ControlSide::start(const config::DaemonConfig& config,
                                                        discovery::DeviceBoard& devices,
                                                        const std::string& peerAddress,
                                                        const observe::StatusBoard* board) {
  const discovery::Inventory inventory = devices.inventory();
  control::ControlServerOptions options;
  options.adminSocket = config.controlAdminSocket;
  options.listen = config.controlListen;
  options.healthListen = config.controlHealthListen;
  options.tlsCertFile = config.controlTlsCertFile;
  options.tlsKeyFile = config.controlTlsKeyFile;
  options.tlsClientCaFile = config.controlTlsClientCaFile;
  options.sources.board = board;
  options.sources.selfAddress = peerAddress;
  options.sources.gpus = [&devices] { return nodeGpusOf(devices.gpus()); };
  options.sources.measureGpus = [&devices] { return nodeGpusOf(devices.measureNow()); };
  if (!config.peerListen.empty()) {
    // PeerSide read the same file a moment ago; a failure here would be a race with an edit.
    auto token = control::ClusterToken::load(config.peerTokenFile);
    if (!token.isOk()) return token.status();
    options.sources.token = std::make_shared<const control::ClusterToken>(std::move(token).value());
  }
  auto server =
      control::ControlServer::start(options, describeNode(config, inventory, peerAddress));
  if (!server.isOk()) return server.status();
  std::unique_ptr<ControlSide> side(new ControlSide(std::move(server.value())));
  control::HealthBoard& health = side->server_->health();
  health.set(control::kDaemonHealthName, control::ServingStatus::Serving);
  // start() runs after PeerSide::start succeeded (a failed Peer listener stops the daemon
  // before this), so the Peers are up or there are none.
  health.set(control::kPeersHealthName, control::ServingStatus::Serving);
  health.set(control::kCollectivesHealthName, control::ServingStatus::NotServing);
  return side;
}

ControlSide::~ControlSide() { shutdown(); }

void ControlSide::markReady() {
  if (server_) server_->health().set(control::kCollectivesHealthName, control::ServingStatus::Serving);
}

void ControlSide::markDraining() {
  draining_ = true;
  if (server_) server_->health().setAllNotServing();
}

void ControlSide::markPeers(const std::set<std::string>& unreachable) {
  const bool serving = unreachable.empty();
  if (serving == peersServing_ || draining_ || !server_) return;
  peersServing_ = serving;
  std::string names;
  for (const std::string& peer : unreachable) names += (names.empty() ? "" : ", ") + peer;
  if (serving) {
    spdlog::info("health: {} SERVING: every peer daemon reachable", control::kPeersHealthName);
  } else {
    spdlog::warn("health: {} NOT_SERVING: peer daemons {} unreachable", control::kPeersHealthName,
                 names);
  }
  server_->health().set(control::kPeersHealthName, serving ? control::ServingStatus::Serving
                                                           : control::ServingStatus::NotServing);
}

void ControlSide::shutdown() {
  if (server_) server_->shutdown();
}

}  // namespace hc::server
