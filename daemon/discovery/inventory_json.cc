// The JSON form of an inventory. nlohmann_json stays inside this file: the header hands out text.
#include <nlohmann/json.hpp>

#include "daemon/discovery/inventory_format.h"

namespace hc::discovery {
namespace {

using nlohmann::json;

json numaJson(int node) { return node < 0 ? json(nullptr) : json(node); }
json textOrNull(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }
json countOrNull(int count) { return count > 0 ? json(count) : json(nullptr); }

json placementFields(const PciPlacement& placement) {
  return {{"pciBusId", textOrNull(placement.busId)},
          {"numaNode", numaJson(placement.numaNode)},
          {"pciPath", placement.path}};
}

json gpuJson(const GpuRow& gpu) {
  json out = {{"id", gpu.id},
              {"vendor", gpu.vendor},
              {"model", gpu.model},
              {"vramBytes", gpu.vramBytes == 0 ? json(nullptr) : json(gpu.vramBytes)},
              {"modelSource", textOrNull(gpu.modelSource)},
              {"vramSource", textOrNull(gpu.vramSource)},
              {"vramEstimated", gpu.vramEstimated},
              {"backend", gpu.backend},
              {"driver", textOrNull(gpu.driver)},
              {"driverVersion", textOrNull(gpu.driverVersion)},
              {"linkSpeed", textOrNull(gpu.linkSpeed)},
              {"linkWidth", countOrNull(gpu.linkWidth)},
              {"maxLinkSpeed", textOrNull(gpu.maxLinkSpeed)},
              {"maxLinkWidth", countOrNull(gpu.maxLinkWidth)},
              {"deviceIndex", gpu.deviceIndex < 0 ? json(nullptr) : json(gpu.deviceIndex)},
              {"nearestNics", gpu.nearestNics},
              {"nicLocality", localityName(gpu.nicLocality)}};
  out.update(placementFields(gpu.placement));
  return out;
}

json nicJson(const Nic& nic) {
  json out = {{"name", nic.name},
              {"operState", textOrNull(nic.operState)},
              {"mtu", nic.mtu > 0 ? json(nic.mtu) : json(nullptr)},
              {"speedMbps", nic.speedMbps < 0 ? json(nullptr) : json(nic.speedMbps)},
              {"mac", textOrNull(nic.mac)},
              {"isVirtual", nic.isVirtual},
              {"isLoopback", nic.isLoopback},
              {"driver", textOrNull(nic.driver)},
              {"rdmaDevice", textOrNull(nic.rdmaDevice)}};
  out.update(placementFields(nic.placement));
  return out;
}

json rdmaJson(const RdmaDevice& device) {
  json ports = json::array();
  for (const RdmaPort& port : device.ports) {
    ports.push_back({{"number", port.number},
                     {"state", textOrNull(port.state)},
                     {"rate", textOrNull(port.rate)},
                     {"rateGbps", port.rateGbps},
                     {"linkLayer", textOrNull(port.linkLayer)}});
  }
  json out = {{"name", device.name}, {"ports", ports}, {"netDevices", device.netDevices}};
  out.update(placementFields(device.placement));
  return out;
}

}  // namespace

std::string inventoryToJson(const Inventory& inventory, int indent) {
  json gpus = json::array();
  for (const GpuRow& gpu : inventory.gpus) gpus.push_back(gpuJson(gpu));
  json nics = json::array();
  for (const Nic& nic : inventory.nics) nics.push_back(nicJson(nic));
  json rdma = json::array();
  for (const RdmaDevice& device : inventory.rdmaDevices) rdma.push_back(rdmaJson(device));
  json out = {{"gpus", gpus}, {"nics", nics}, {"rdmaDevices", rdma}, {"notes", inventory.notes}};
  // Replace, not throw, on invalid UTF-8: driver strings are not guaranteed to be valid.
  return out.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace hc::discovery
