#include "daemon/metrics/daemon_metrics.h"

namespace hc::metrics {

const std::vector<double>& collectiveDurationBounds() {
  // clang-format off
  static const std::vector<double> bounds = {
      10e-6,  25e-6,  50e-6,    // small ops on one node
      100e-6, 250e-6, 500e-6,
      1e-3,   2.5e-3, 5e-3,
      10e-3,  25e-3,  50e-3,
      100e-3, 250e-3, 500e-3,
      1,      2.5,    5,        // large ops across nodes
      10,     25,     50,
      100};                     // beyond: a stall, counted in +Inf
  // clang-format on
  return bounds;
}

std::string_view sizeClass(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024;
  constexpr uint64_t kMiB = 1024 * kKiB;
  if (bytes <= 4 * kKiB) return "le_4KiB";
  if (bytes <= 64 * kKiB) return "le_64KiB";
  if (bytes <= kMiB) return "le_1MiB";
  if (bytes <= 16 * kMiB) return "le_16MiB";
  return "gt_16MiB";
}

DaemonMetrics::DaemonMetrics(BuildInfo build)
    : buildInfo_(registry_.gauge("hetero_comm_build_info",
                                 "Build of this hetero-commd; the value is always 1.",
                                 {"version", "cuda", "rocm", "ucx"})),
      collectives_(registry_.counter("hetero_comm_collectives_total",
                                     "Collective and point-to-point operations finished, by "
                                     "operation, data type and outcome.",
                                     {"op", "dtype", "status"})),
      duration_(registry_.histogram("hetero_comm_collective_duration_seconds",
                                    "Duration of operations that finished ok, by operation and "
                                    "size class of the bytes moved per rank.",
                                    {"op", "size_class"}, collectiveDurationBounds())),
      bytes_(registry_.counter("hetero_comm_bytes_total",
                               "Bytes moved by this daemon, by direction and transport.",
                               {"direction", "transport"})),
      peerUp_(registry_.gauge("hetero_comm_peer_up",
                              "1 while the connection to a peer daemon is up, 0 once it is lost.",
                              {"peer"})),
      clients_(registry_.gauge("hetero_comm_clients", "Client processes connected now.")),
      stagingFallbacks_(registry_.counter(
          "hetero_comm_staging_fallback_total",
          "Device operations that fell back to staging through host memory, by reason.",
          {"reason"})),
      deviceReductions_(registry_.counter(
          "hetero_comm_device_reductions_total",
          "Local reductions run by a device's kernel instead of the host, by whether the "
          "operands sat on one device or were gathered from several.",
          {"devices"})),
      directTransfers_(registry_.counter(
          "hetero_comm_device_direct_transfers_total",
          "Sends and receives between daemons whose device memory the transport took in place, "
          "without staging through host memory.")),
      deviceImports_(registry_.counter(
          "hetero_comm_device_imports_total",
          "Device allocations of clients mapped into the daemon (registered once, reused by "
          "every operation on them until freed or released).")),
      deviceReleases_(registry_.counter(
          "hetero_comm_device_releases_total",
          "Imported device allocations unmapped again: freed or released by their client, or "
          "their client gone.")),
      deviceImportedBytes_(
          registry_.gauge("hetero_comm_device_imported_bytes",
                          "Bytes of clients' device memory mapped into the daemon now.")),
      deviceDirect_(registry_.gauge(
          "hetero_comm_device_direct",
          "1 for a device whose memory the transport takes in place (the startup probe passed), "
          "0 for one that stages through host memory.",
          {"device"})),
      unexpectedMessages_(registry_.counter(
          "hetero_comm_unexpected_messages_total",
          "Messages from peer daemons dropped unread, by reason: stale (their communicator is "
          "gone here), unknown (no communicator here took their identity in time), over_limit "
          "(beyond what is held per peer for communicators not formed here yet).",
          {"reason"})),
      deviceWeight_(registry_.gauge(
          "hetero_comm_device_weight",
          "A GPU's measured rate (staging in, sum kernel, staging out) relative to the fastest "
          "GPU of this node, which is 1; a framework may share work out by it.",
          {"device"})),
      deviceRate_(registry_.gauge(
          "hetero_comm_device_rate_gbps",
          "The rate the weight compares, GB/s: 1 / (1/host-to-device + 1/device-to-host + "
          "1/sum kernel).",
          {"device"})) {
  buildInfo_.set(
      {build.version, build.cuda ? "true" : "false", build.rocm ? "true" : "false", build.ucx}, 1);
  // Present from the start: "no clients" is a reading, not a missing series.
  clients_.set({}, 0);
  deviceImports_.add({}, 0);
  deviceReleases_.add({}, 0);
  deviceImportedBytes_.set({}, 0);
  for (const char* reason : {"stale", "unknown", "over_limit"})
    unexpectedMessages_.add({reason}, 0);
}

void DaemonMetrics::collectiveFinished(std::string_view op, std::string_view dtype,
                                       std::string_view status, double seconds, uint64_t bytes) {
  collectives_.add({std::string(op), std::string(dtype), std::string(status)}, 1);
  if (status != "ok") return;
  // A negative or NaN duration is a caller's bug; counted as 0 it cannot poison _sum (NaN
  // would stay there for the daemon's lifetime).
  if (!(seconds >= 0)) seconds = 0;
  duration_.observe({std::string(op), std::string(sizeClass(bytes))}, seconds);
}

void DaemonMetrics::addBytes(std::string_view direction, std::string_view transport,
                             uint64_t bytes) {
  bytes_.add({std::string(direction), std::string(transport)}, static_cast<double>(bytes));
}

void DaemonMetrics::setPeerUp(std::string_view peer, bool up) {
  peerUp_.set({std::string(peer)}, up ? 1 : 0);
}

void DaemonMetrics::setClients(int64_t connected) {
  clients_.set({}, static_cast<double>(connected));
}

void DaemonMetrics::stagingFallback(std::string_view reason) {
  stagingFallbacks_.add({std::string(reason)}, 1);
}

void DaemonMetrics::deviceDirectTransfer() { directTransfers_.add({}, 1); }

void DaemonMetrics::deviceImported(uint64_t bytes) {
  deviceImports_.add({}, 1);
  deviceImportedBytes_.add({}, static_cast<double>(bytes));
}

void DaemonMetrics::deviceReleased(uint64_t bytes) {
  deviceReleases_.add({}, 1);
  deviceImportedBytes_.add({}, -static_cast<double>(bytes));
}

void DaemonMetrics::unexpectedMessagesDropped(std::string_view reason, uint64_t count) {
  unexpectedMessages_.add({std::string(reason)}, static_cast<double>(count));
}

void DaemonMetrics::setDeviceDirect(std::string_view device, bool direct) {
  deviceDirect_.set({std::string(device)}, direct ? 1 : 0);
}

void DaemonMetrics::setDeviceWeight(std::string_view device, double weight, double rateGBps) {
  deviceWeight_.set({std::string(device)}, weight);
  deviceRate_.set({std::string(device)}, rateGBps);
}

void DaemonMetrics::deviceReduction(bool acrossDevices) {
  deviceReductions_.add({acrossDevices ? "several" : "one"}, 1);
}

std::string DaemonMetrics::render() const { return registry_.render(); }

}  // namespace hc::metrics
