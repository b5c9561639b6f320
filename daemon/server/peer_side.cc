#include "daemon/server/peer_side.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/coll/net/net_op.h"
#include "daemon/transport/ucx/ucx_transport.h"

namespace hc::server {

Result<std::unique_ptr<PeerSide>> PeerSide::start(const config::DaemonConfig& config,
                                                  const device::DeviceRegistry& devices,
                                                  const observe::StatusBoard* board,
                                                  HeartbeatBoard* heartbeats,
                                                  metrics::DaemonMetrics* metrics) {
  std::unique_ptr<PeerSide> p(new PeerSide());
  control::PeerServerOptions so;
  so.bindAddress = config.peerListen;
  so.tokenPath = config.peerTokenFile;
  so.board = board;
  so.defaultJoinTimeout = std::chrono::milliseconds(config.initTimeoutMs);
  auto server = control::PeerServer::start(so);
  if (!server.isOk()) {
    return Status{server.status().code(),
                  "peer listener on " + config.peerListen + ": " + server.status().message()};
  }
  p->server_ = std::move(server.value());
  p->advertise_ = config::peerAdvertiseAddress(config, static_cast<uint16_t>(p->server_->port()));

  control::PeerClientOptions co;
  co.tokenPath = config.peerTokenFile;
  auto client = control::PeerClient::create(co);
  if (!client.isOk()) return client.status();
  p->client_ = std::move(client.value());

  transport::UcxOptions uo;
  uo.transports = config.peerUcxTransports;
  uo.socketIfname = config.peerSocketIfname;
  uo.keepaliveInterval = std::chrono::milliseconds(config.peerKeepaliveMs);
  auto ucx = transport::createUcxTransport(uo);
  if (!ucx.isOk()) return ucx.status();
  // Staged transfers cut their copies as the transport cuts messages, probed or not.
  p->direct_.minBytes = ucx.value()->directMinBytes();
  // Before the progress thread takes the transport: the probe drives it from here.
  if (config.devicesDirect) {
    p->direct_ = staging::probeDirectDevices(*ucx.value(), devices, staging::DirectProbeOptions{},
                                             &p->verdicts_);
  }
  coll::net::NetExecutorOptions eo;
  eo.maxSleep = transport::maxSleep(uo);
  if (heartbeats != nullptr) eo.heartbeat = heartbeats->add("hc-net-progress");
  eo.silenceTimeout = std::chrono::milliseconds(config.peerSilenceTimeoutMs);
  // At least four heartbeats per silence timeout, so one late heartbeat never fails a peer; with
  // the check off, peers that check us still hear from us once per keepalive interval.
  const uint32_t silence = config.peerSilenceTimeoutMs;
  eo.heartbeatInterval = std::chrono::milliseconds(
      silence == 0 ? config.peerKeepaliveMs
                   : std::clamp<uint32_t>(silence / 5, 1, config.peerKeepaliveMs));
  // A communicator's first message may come before it formed here, but never later than a
  // communicator may take to form.
  eo.holdUnknownFor = std::chrono::milliseconds(std::max<int32_t>(config.initTimeoutMs, 1));
  if (metrics != nullptr) {
    eo.onDropped = [metrics](std::string_view reason, size_t count) {
      metrics->unexpectedMessagesDropped(reason, count);
    };
  }
  auto executor = coll::net::NetExecutor::start(std::move(ucx.value()), eo);
  if (!executor.isOk()) return executor.status();
  p->executor_ = std::move(executor.value());

  auto identity = peer::localNodeIdentity(p->advertise_);
  if (!identity.isOk()) return identity.status();
  p->identity_ = std::move(identity.value());
  auto algo = coll::net::parseAllreduceAlgo(config.peerAlgo);
  if (!algo.isOk()) return algo.status();
  p->netOptions_.allreduceAlgo = *algo;
  p->netOptions_.chunkBytes = config.peerChunkBytes;
  spdlog::info(
      "peer listener on {} (advertised as {}); UCX transports '{}', keepalive {} ms, "
      "allreduce among daemons: {}",
      config.peerListen, p->advertise_,
      config.peerUcxTransports.empty() ? "default" : config.peerUcxTransports,
      config.peerKeepaliveMs, coll::net::allreduceAlgoName(*algo));
  return p;
}

PeerSide::~PeerSide() { shutdown(); }

session::MultiNode PeerSide::multiNode() {
  session::MultiNode m;
  m.bootstrap = this;
  m.executor = executor_.get();
  m.identity = identity_;
  m.netOptions = netOptions_;
  m.direct = direct_;
  return m;
}

session::Bootstrap::JoinId PeerSide::join(const std::string& root, peer::JoinRequest request,
                                          std::chrono::steady_clock::time_point deadline,
                                          Done done) {
  if (!client_) {
    done(unavailable("hetero-commd is shutting down"));
    return 0;
  }
  return client_->joinAsync(root, std::move(request), deadline, std::move(done));
}

void PeerSide::withdraw(JoinId id) {
  if (client_) client_->withdraw(id);
}

void PeerSide::shutdown() {
  client_.reset();
  if (server_) server_->shutdown();
  if (executor_) executor_->stop();
}

}  // namespace hc::server
