#include "daemon/control/control_service.h"

#include <thread>

namespace hc::control {

void gpuToProto(const NodeGpu& gpu, hetero_comm::v1::Gpu* row) {
  row->set_id(gpu.id);
  row->set_vendor(gpu.vendor);
  row->set_model(gpu.model);
  row->set_vram_bytes(gpu.vramBytes);
  row->set_backend(gpu.backend);
  row->set_pci_bus_id(gpu.pciBusId);
  row->set_numa_node(gpu.numaNode);
  row->set_driver(gpu.driver);
  row->set_driver_version(gpu.driverVersion);
  row->set_model_source(gpu.modelSource);
  row->set_vram_source(gpu.vramSource);
  row->set_vram_estimated(gpu.vramEstimated);
  row->set_link_speed(gpu.linkSpeed);
  row->set_link_width(gpu.linkWidth);
  row->set_max_link_speed(gpu.maxLinkSpeed);
  row->set_max_link_width(gpu.maxLinkWidth);
  for (const std::string& nic : gpu.nearestNics) row->add_nearest_nics(nic);
  row->set_nic_locality(gpu.nicLocality);
  hetero_comm::v1::DeviceSpeed* speed = row->mutable_speed();
  speed->set_measured(gpu.speed.measured);
  speed->set_h2d_gbps(gpu.speed.h2dGBps);
  speed->set_d2h_gbps(gpu.speed.d2hGBps);
  speed->set_reduce_gbps(gpu.speed.reduceGBps);
  speed->set_rate_gbps(gpu.speed.rateGBps);
  speed->set_weight(gpu.speed.weight);
  speed->set_measured_unix_ms(gpu.speed.measuredUnixMs);
  speed->set_note(gpu.speed.note);
}

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
  for (const NodeGpu& gpu : node.gpus) gpuToProto(gpu, out->add_gpus());
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
  if (sources_.gpus) {
    response->clear_gpus();
    for (const NodeGpu& gpu : sources_.gpus()) gpuToProto(gpu, response->add_gpus());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::MeasureDevices(
    grpc::CallbackServerContext* context, const hetero_comm::v1::MeasureDevicesRequest* /*request*/,
    hetero_comm::v1::MeasureDevicesResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!sources_.measureGpus) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this daemon measures no devices"));
    return reactor;
  }
  const Caller caller = callerOf(*context);
  if (!caller.seesEverything()) {
    // Measuring occupies every GPU of the node for a moment, under every tenant's jobs.
    reactor->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                 "measuring the devices slows every job on this node for a "
                                 "moment: admins only (root, group " +
                                     std::string(kAdminGroup) + "); " + caller.describe() +
                                     " is not one"));
    return reactor;
  }
  {
    std::lock_guard lock(tracesMutex_);
    ++tracesRunning_;
  }
  // Tens of milliseconds per GPU: never on gRPC's callback thread.
  std::thread([this, response, reactor] {
    for (const NodeGpu& gpu : sources_.measureGpus()) gpuToProto(gpu, response->add_gpus());
    reactor->Finish(grpc::Status::OK);
    std::lock_guard lock(tracesMutex_);
    --tracesRunning_;
    tracesDone_.notify_all();
  }).detach();
  return reactor;
}

}  // namespace hc::control
