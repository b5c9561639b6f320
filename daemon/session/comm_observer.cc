#include "daemon/session/comm_observer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/observe/flight_json.h"
#include "daemon/session/session.h"

namespace hc::session {

namespace {

// "ok", "timeout", "aborted" (a dead or departed party, an abort) or "error".
const char* statusLabel(const Status& status) {
  switch (status.code()) {
    case Code::Ok: return "ok";
    case Code::Timeout: return "timeout";
    case Code::Unavailable: return "aborted";
    default: return "error";
  }
}

// One local rank's operation, in the metrics. Bytes are what the daemon read from the rank's
// send buffer and wrote to its receive buffer; the transport says whether the communicator
// reaches other daemons (ucx) or stays on this one (shm).
void countFinished(metrics::DaemonMetrics& metrics, const observe::FlightEntry& e,
                   const Status& status, const char* transport) {
  const int64_t start =
      e.timeDiscoveredStartedNs != 0 ? e.timeDiscoveredStartedNs : e.timeCreatedNs;
  const double seconds = static_cast<double>(e.timeDiscoveredCompletedNs - start) / 1e9;
  metrics.collectiveFinished(e.what.op, e.what.dtype.empty() ? "none" : e.what.dtype,
                             statusLabel(status), seconds,
                             std::max(e.what.bytesIn, e.what.bytesOut));
  if (!status.isOk()) return;
  if (e.what.bytesIn != 0) metrics.addBytes("sent", transport, e.what.bytesIn);
  if (e.what.bytesOut != 0) metrics.addBytes("received", transport, e.what.bytesOut);
}

}  // namespace

CommObserver::CommObserver(const EngineOptions* options, std::string selfInstance)
    : options_(*options), selfInstance_(std::move(selfInstance)) {}

CommObserver::~CommObserver() = default;

void CommObserver::observe(const std::shared_ptr<Communicator>& comm, std::string keyHex,
                           uint64_t wireIdentity, std::vector<std::string> nodeAddresses,
                           std::vector<std::vector<int>> ranksOfNode) {
  if (options_.board == nullptr) return;
  observe::CommIdentity identity;
  identity.id = comm->id();
  identity.keyHex = keyHex;
  identity.wireIdentity = wireIdentity;
  identity.nranks = comm->nranks();
  identity.localRanks = comm->localRanks();
  identity.nodeAddresses = std::move(nodeAddresses);
  identity.ranksOfNode = std::move(ranksOfNode);
  const bool spans = !identity.nodeAddresses.empty();
  // Every daemon of a communicator that just formed answered its root: reachable again.
  for (const std::string& peer : identity.nodeAddresses) {
    if (peer == selfInstance_) continue;  // this daemon
    lostPeers_.erase(peer);
    if (options_.metrics != nullptr) options_.metrics->setPeerUp(peer, true);
  }
  auto recorder = options_.board->commCreated(std::move(identity), options_.flightRecordEntries);
  if (options_.metrics != nullptr) {
    recorder->setFinishSink([metrics = options_.metrics, spans](const observe::FlightEntry& e,
                                                                const Status& status) {
      countFinished(*metrics, e, status, spans ? "ucx" : "shm");
    });
  }
  for (int rank : comm->localRanks()) {
    if (const Session* member = comm->member(rank)) {
      options_.board->clientJoined(member->id(), comm->id());
    }
  }
  comm->observe(std::move(recorder), std::move(keyHex), options_.lateReportMs,
                [this](const Communicator& c, const std::string& reason,
                       const std::string& detail) {
                  onIncident(c, reason, detail);
                });
}

void CommObserver::onIncident(const Communicator& comm, const std::string& reason,
                              const std::string& detail) {
  if (reason == "late") {
    spdlog::warn("communicator {:x} ({}): {}", comm.id(), comm.keyHex(), detail);
  }
  if (options_.stateDir.empty() || !comm.recorder()) return;
  if (!dumper_) {
    dumper_ = std::make_unique<observe::FlightDumper>(
        observe::FlightDumper::Options{.stateDir = options_.stateDir},
        [board = options_.board](const Result<std::string>& path, const std::string& what) {
          if (!path.isOk()) {
            spdlog::error("{}: cannot dump its flight record: {}", what, path.status().toString());
            return;
          }
          board->flightDumped();
          spdlog::info("{}: flight record dumped to {}", what, path.value());
        });
  }
  const std::string what = fmt::format("communicator {:x} ({})", comm.id(), reason);
  if (!dumper_->submit(comm.recorder()->snapshot(), reason, detail, what)) {
    // Counted, and said at most once per power of two, so a flood of incidents floods no log.
    const uint64_t skipped = dumper_->skipped();
    if ((skipped & (skipped - 1)) == 0) {
      spdlog::warn("{}: flight record not dumped ({} skipped so far: more than 10 a minute)",
                   what, skipped);
    }
  }
}

void CommObserver::countStaging(const Match& match, const char* reason) {
  if (options_.metrics == nullptr) return;
  const bool device = std::any_of(match.ops.begin(), match.ops.end(), [](const PendingOp& op) {
    return op.sendRegion != nullptr || op.recvRegion != nullptr;
  });
  if (!device) return;
  // Device memory took the host path. Reasons: transport_host_only (across daemons: this UCX
  // moves host memory only), host_reduction (operands of two vendors, host memory among them,
  // or not a reduction), no_reduce_kernels (the home device's kernels did not load).
  options_.metrics->stagingFallback(reason);
}

void CommObserver::peerLost(const Communicator& comm, uint32_t node) {
  if (!comm.recorder()) return;
  const std::vector<std::string>& addresses = comm.recorder()->identity().nodeAddresses;
  if (node >= addresses.size()) return;
  lostPeers_.insert(addresses[node]);
  if (options_.metrics != nullptr) options_.metrics->setPeerUp(addresses[node], false);
}

}  // namespace hc::session
