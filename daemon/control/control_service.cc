#include "daemon/control/control_service.h"

namespace hc::control {

void toProto(const NodeInfo& node, std::chrono::steady_clock::time_point now,
             hetero_comm::v1::NodeInfo* out) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  out->set_version(node.version);
  out->mutable_build()->set_cuda(node.builtWithCuda);
  out->mutable_build()->set_hip(node.builtWithHip);
  out->set_uptime_ms(
      static_cast<uint64_t>(std::max<int64_t>(0, duration_cast<milliseconds>(now - node.startedSteady).count())));
  out->set_start_time_unix_ms(
      duration_cast<milliseconds>(node.startedWall.time_since_epoch()).count());
  out->set_hostname(node.hostname);
  for (const NodeGpu& gpu : node.gpus) {
    hetero_comm::v1::Gpu* row = out->add_gpus();
    row->set_id(gpu.id);
    row->set_vendor(gpu.vendor);
    row->set_model(gpu.model);
    row->set_vram_bytes(gpu.vramBytes);
    row->set_backend(gpu.backend);
    row->set_pci_bus_id(gpu.pciBusId);
    row->set_numa_node(gpu.numaNode);
    row->set_driver(gpu.driver);
  }
  for (const NodeNic& nic : node.nics) {
    hetero_comm::v1::Nic* row = out->add_nics();
    row->set_name(nic.name);
    row->set_pci_bus_id(nic.pciBusId);
    row->set_numa_node(nic.numaNode);
    row->set_speed_mbps(nic.speedMbps);
    row->set_oper_state(nic.operState);
    row->set_is_virtual(nic.isVirtual);
    row->set_rdma_device(nic.rdmaDevice);
  }
  for (const std::string& transport : node.transports) out->add_transports(transport);
  out->set_peer_address(node.peerAddress);
  out->set_client_socket(node.clientSocket);
  out->set_config_toml(node.configToml);
}

grpc::ServerUnaryReactor* ControlService::GetNode(grpc::CallbackServerContext* context,
                                                  const hetero_comm::v1::GetNodeRequest* /*request*/,
                                                  hetero_comm::v1::NodeInfo* response) {
  toProto(node_, std::chrono::steady_clock::now(), response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace hc::control
