// hcctl node and hcctl devices: hetero_comm.v1.Control/GetNode, as text or JSON. The GPU table is
// common/inventory_text.h's formatGpuTable (the one the daemon's inventory prints through), fed
// from the RPC's rows.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/inventory_text.h"
#include "hetero_comm/v1/control.grpc.pb.h"
#include "tools/hcctl/commands.h"

namespace hc::hcctl {
namespace {

using nlohmann::json;

constexpr std::chrono::milliseconds kMeasureDeadline{60000};

json textOrNull(const std::string& t) { return t.empty() ? json(nullptr) : json(t); }
json positiveOrNull(int64_t n) { return n > 0 ? json(n) : json(nullptr); }

// Figures of a measured device; all null (and "note" why) when not measured.
json speedJson(const hetero_comm::v1::DeviceSpeed& speed) {
  auto figure = [&](double value) { return speed.measured() ? json(value) : json(nullptr); };
  return {{"measured", speed.measured()},
          {"weight", figure(speed.weight())},
          {"rateGBps", figure(speed.rate_gbps())},
          {"h2dGBps", figure(speed.h2d_gbps())},
          {"d2hGBps", figure(speed.d2h_gbps())},
          {"reduceGBps", figure(speed.reduce_gbps())},
          {"measuredUnixMs", positiveOrNull(speed.measured_unix_ms())},
          {"note", textOrNull(speed.note())}};
}

// Unknown values are null, as in the daemon's inventory JSON (daemon/discovery/inventory_json.cc).
json gpuJson(const hetero_comm::v1::Gpu& gpu) {
  return {{"id", gpu.id()},
          {"vendor", gpu.vendor()},
          {"model", gpu.model()},
          {"modelSource", textOrNull(gpu.model_source())},
          {"vramBytes", gpu.vram_bytes() == 0 ? json(nullptr) : json(gpu.vram_bytes())},
          {"vramSource", textOrNull(gpu.vram_source())},
          {"vramEstimated", gpu.vram_estimated()},
          {"backend", gpu.backend()},
          {"pciBusId", textOrNull(gpu.pci_bus_id())},
          {"numaNode", gpu.numa_node() < 0 ? json(nullptr) : json(gpu.numa_node())},
          {"driver", textOrNull(gpu.driver())},
          {"driverVersion", textOrNull(gpu.driver_version())},
          {"linkSpeed", textOrNull(gpu.link_speed())},
          {"linkWidth", positiveOrNull(gpu.link_width())},
          {"maxLinkSpeed", textOrNull(gpu.max_link_speed())},
          {"maxLinkWidth", positiveOrNull(gpu.max_link_width())},
          {"nearestNics", std::vector<std::string>(gpu.nearest_nics().begin(),
                                                   gpu.nearest_nics().end())},
          {"nicLocality", textOrNull(gpu.nic_locality())},
          {"weight", gpu.speed().measured() ? json(gpu.speed().weight()) : json(nullptr)},
          {"speed", speedJson(gpu.speed())}};
}

json nicJson(const hetero_comm::v1::Nic& nic) {
  return {{"name", nic.name()},
          {"pciBusId", textOrNull(nic.pci_bus_id())},
          {"numaNode", nic.numa_node() < 0 ? json(nullptr) : json(nic.numa_node())},
          {"speedMbps", nic.speed_mbps() < 0 ? json(nullptr) : json(nic.speed_mbps())},
          {"operState", textOrNull(nic.oper_state())},
          {"isVirtual", nic.is_virtual()},
          {"rdmaDevice", textOrNull(nic.rdma_device())}};
}

using GpuList = google::protobuf::RepeatedPtrField<hetero_comm::v1::Gpu>;

json gpusJson(const GpuList& gpus) {
  json out = json::array();
  for (const auto& gpu : gpus) out.push_back(gpuJson(gpu));
  return out;
}

std::string gpuTable(const GpuList& gpus) {
  std::vector<GpuTableRow> rows;
  for (const auto& gpu : gpus) {
    rows.push_back({gpu.id(), gpu.vendor(), gpu.model(), gpu.vram_bytes(), gpu.backend(),
                    gpu.pci_bus_id(), gpu.numa_node(),
                    gpu.speed().measured() ? gpu.speed().weight() : 0, gpu.vram_estimated()});
  }
  return formatGpuTable(rows);
}

// Under the table: what each weight is made of, or why a runtime's GPU has none.
std::string speedLines(const GpuList& gpus) {
  std::ostringstream out;
  for (const auto& gpu : gpus) {
    const auto& speed = gpu.speed();
    if (speed.measured()) {
      char line[256];
      std::snprintf(line, sizeof(line),
                    "%s: weight %.2f = rate %.2f GB/s (host to device %.2f, device to host %.2f, "
                    "sum kernel %.2f GB/s)\n",
                    gpu.id().c_str(), speed.weight(), speed.rate_gbps(), speed.h2d_gbps(),
                    speed.d2h_gbps(), speed.reduce_gbps());
      out << line;
    } else if (gpu.backend() != "none" && !speed.note().empty()) {
      out << gpu.id() << ": " << speed.note() << "\n";
    }
  }
  return out.str();
}

std::string formatUptime(uint64_t ms) {
  uint64_t s = ms / 1000;
  std::ostringstream out;
  if (s >= 86400) out << s / 86400 << "d ";
  if (s >= 3600) out << (s / 3600) % 24 << "h ";
  if (s >= 60) out << (s / 60) % 60 << "m ";
  out << s % 60 << "s";
  return out.str();
}

// GetNode, or the exit code to return (its reason printed).
int getNode(const Target& target, hetero_comm::v1::NodeInfo* node) {
  auto channel = connect(target);
  if (!channel) return kExitConnectFailed;
  auto stub = hetero_comm::v1::Control::NewStub(channel);
  auto context = rpcContext(target);
  grpc::Status status = stub->GetNode(context.get(), hetero_comm::v1::GetNodeRequest(), node);
  if (!status.ok()) {
    std::cerr << "hcctl: Control.GetNode at " << target.uri()
              << " failed: " << status.error_message() << " (gRPC code " << status.error_code()
              << ")\n";
    return kExitRpcFailed;
  }
  return kExitOk;
}

}  // namespace

int runNode(const Target& target, bool asJson, bool printConfig) {
  hetero_comm::v1::NodeInfo node;
  if (int code = getNode(target, &node); code != kExitOk) return code;
  if (printConfig) {
    std::cout << node.config_toml();
    return kExitOk;
  }
  if (asJson) {
    json nics = json::array();
    for (const auto& nic : node.nics()) nics.push_back(nicJson(nic));
    json out = {{"version", node.version()},
                {"build", {{"cuda", node.build().cuda()}, {"hip", node.build().hip()}}},
                {"uptimeMs", node.uptime_ms()},
                {"startTimeUnixMs", node.start_time_unix_ms()},
                {"hostname", node.hostname()},
                {"gpus", gpusJson(node.gpus())},
                {"nics", nics},
                {"transports", json(std::vector<std::string>(node.transports().begin(),
                                                             node.transports().end()))},
                {"peerAddress", node.peer_address()},
                {"clientSocket", node.client_socket()},
                {"config", node.config_toml()}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  auto yesNo = [](bool b) { return b ? "yes" : "no"; };
  std::cout << "hetero-commd " << node.version() << " on " << node.hostname() << "\n"
            << "built with:    CUDA " << yesNo(node.build().cuda()) << ", HIP "
            << yesNo(node.build().hip()) << "\n"
            << "uptime:        " << formatUptime(node.uptime_ms()) << "\n"
            << "client socket: " << node.client_socket() << "\n"
            << "peer address:  "
            << (node.peer_address().empty() ? "- (single node)" : node.peer_address()) << "\n"
            << "transports:    ";
  if (node.transports().empty()) std::cout << "- (UCX chooses)";
  for (int i = 0; i < node.transports_size(); ++i) {
    std::cout << (i ? "," : "") << node.transports(i);
  }
  std::cout << "\n\nGPUs\n" << gpuTable(node.gpus()) << "\nNICs\n";
  for (const auto& nic : node.nics()) {
    std::cout << "  " << nic.name() << "  " << (nic.oper_state().empty() ? "-" : nic.oper_state())
              << "  " << formatSpeed(nic.speed_mbps()) << "  pci "
              << (nic.pci_bus_id().empty() ? "-" : nic.pci_bus_id()) << "  numa "
              << (nic.numa_node() < 0 ? "-" : std::to_string(nic.numa_node()))
              << (nic.is_virtual() ? "  virtual" : "")
              << (nic.rdma_device().empty() ? "" : "  rdma " + nic.rdma_device()) << "\n";
  }
  if (node.nics().empty()) std::cout << "  (none)\n";
  return kExitOk;
}

int runDevices(const Target& target, bool asJson, bool measure) {
  GpuList gpus;
  if (measure) {
    hetero_comm::v1::MeasureDevicesResponse measured;
    auto channel = connect(target);
    if (!channel) return kExitConnectFailed;
    auto stub = hetero_comm::v1::Control::NewStub(channel);
    auto context = rpcContext(target);
    // Timing every GPU takes tens of milliseconds each, seconds for slow or many ones: more than
    // the deadline that suits a lookup.
    context->set_deadline(std::chrono::system_clock::now() +
                          std::max<std::chrono::milliseconds>(target.rpcTimeout, kMeasureDeadline));
    grpc::Status status =
        stub->MeasureDevices(context.get(), hetero_comm::v1::MeasureDevicesRequest(), &measured);
    if (!status.ok()) {
      std::cerr << "hcctl: Control.MeasureDevices at " << target.uri()
                << " failed: " << status.error_message() << " (gRPC code " << status.error_code()
                << ")\n";
      return kExitRpcFailed;
    }
    gpus = std::move(*measured.mutable_gpus());
  } else {
    hetero_comm::v1::NodeInfo node;
    if (int code = getNode(target, &node); code != kExitOk) return code;
    gpus = std::move(*node.mutable_gpus());
  }
  if (asJson) {
    std::cout << json{{"gpus", gpusJson(gpus)}}.dump(2) << "\n";
  } else {
    std::cout << gpuTable(gpus) << speedLines(gpus);
  }
  return kExitOk;
}

}  // namespace hc::hcctl
