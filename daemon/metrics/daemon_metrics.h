// DaemonMetrics: hetero-commd's own metric set (names fixed by conventions A4, prefix
// hetero_comm_), over a Registry. The daemon's modules report events here; MetricsServer renders
// it for Prometheus.
// Depends on registry.h only: no session, transport or gRPC types cross this header, so every
// layer may report without pulling in another.
//
// Threads: every method may be called from any thread (the IPC thread reports, civetweb's
// threads render).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/metrics/registry.h"

namespace hc::metrics {

struct BuildInfo {
  std::string version;
  bool cuda = false;  // the CUDA device backend is compiled in
  bool rocm = false;  // the HIP device backend is compiled in
  std::string ucx;    // UCX version string, "" without UCX
};

// Upper bounds (seconds) of hetero_comm_collective_duration_seconds: 10 us to 100 s in 1-2.5-5
// steps. A small allreduce on one node takes tens of microseconds; a large one across nodes,
// seconds; anything past 100 s is a stall, and +Inf says so.
const std::vector<double>& collectiveDurationBounds();

// The bounded size_class label for `bytes` moved per rank: "le_4KiB", "le_64KiB", "le_1MiB",
// "le_16MiB" or "gt_16MiB" (upper bounds inclusive). Raw byte counts would make a series per
// message size.
std::string_view sizeClass(uint64_t bytes);

class DaemonMetrics {
 public:
  explicit DaemonMetrics(BuildInfo build);
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // One finished operation: op as NCCL names it in lower case ("allreduce", "allgather",
  // "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter", "send", "recv",
  // "barrier"), dtype ("float32", "bfloat16", ...), status ("ok", "error", "timeout",
  // "aborted"), its duration, and the bytes it moved per rank. Every call counts in
  // hetero_comm_collectives_total; only "ok" ones enter the duration histogram, since a failed
  // or timed-out op's duration measures the failure (often a deadline), not the collective.
  void collectiveFinished(std::string_view op, std::string_view dtype, std::string_view status,
                          double seconds, uint64_t bytes);
  // direction: "sent" | "received"; transport: "shm", "ucx", "staging".
  void addBytes(std::string_view direction, std::string_view transport, uint64_t bytes);
  // peer: the peer daemon's address as the daemon names it (bounded by the cluster's size).
  void setPeerUp(std::string_view peer, bool up);
  void setClients(int64_t connected);
  // A device reduction or copy that fell back to host staging, and why (a short fixed word such
  // as "module_load_failed", never free text: each distinct reason is a series).
  void stagingFallback(std::string_view reason);
  // A local reduction that ran on a device's kernel; acrossDevices: its operands were gathered
  // from several devices of one vendor (devices="several"), else they sat on one ("one").
  void deviceReduction(bool acrossDevices);
  // A send or receive between daemons that lent device memory to the transport in place.
  void deviceDirectTransfer();
  // A client's device allocation mapped into the daemon (MemRegister), and one unmapped again
  // (unregistered, or its client gone, and no op using it any more).
  void deviceImported(uint64_t bytes);
  void deviceReleased(uint64_t bytes);
  // Messages from peer daemons dropped unread: reason "stale" (their communicator is gone here),
  // "unknown" (no communicator here took their identity in time), "over_limit" (beyond what is
  // held per peer for communicators not formed here yet).
  void unexpectedMessagesDropped(std::string_view reason, uint64_t count);
  // The startup probe's verdict for a device ("sim:nvidia:0", "cuda:nvidia:1").
  void setDeviceDirect(std::string_view device, bool direct);
  // A GPU's measured speed relative to the node's fastest (1.0), by its inventory id
  // ("nvidia:0", "sim-amd:1"); rateGBps is the figure the weight compares.
  void setDeviceWeight(std::string_view device, double weight, double rateGBps);

  // The whole set in the text exposition format 0.0.4.
  std::string render() const;

 private:
  Registry registry_;
  // Borrowed from registry_, which owns them for its lifetime.
  GaugeFamily& buildInfo_;
  CounterFamily& collectives_;
  HistogramFamily& duration_;
  CounterFamily& bytes_;
  GaugeFamily& peerUp_;
  GaugeFamily& clients_;
  CounterFamily& stagingFallbacks_;
  CounterFamily& deviceReductions_;
  CounterFamily& directTransfers_;
  CounterFamily& deviceImports_;
  CounterFamily& deviceReleases_;
  GaugeFamily& deviceImportedBytes_;
  GaugeFamily& deviceDirect_;
  CounterFamily& unexpectedMessages_;
  GaugeFamily& deviceWeight_;
  GaugeFamily& deviceRate_;
};

}  // namespace hc::metrics
