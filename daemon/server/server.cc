#include "daemon/server/server.h"

#include <signal.h>
#include <sched.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/ipc/frames.h"
#include "common/seqpacket.h"
#include "daemon/peer/peer_types.h"
#include "daemon/server/device_entries.h"
#include "daemon/server/devices.h"
#include "daemon/transport/ucx/ucx_transport.h"

namespace hc::server {
namespace {

using Clock = std::chrono::steady_clock;

// epoll tags: the kind in the top byte, a session id below.
constexpr uint64_t kListenTag = 1ull << 56;
constexpr uint64_t kSignalTag = 2ull << 56;
constexpr uint64_t kDoneTag = 3ull << 56;
constexpr uint64_t kSocketTag = 4ull << 56;
constexpr uint64_t kEventTag = 5ull << 56;
constexpr uint64_t kNetTag = 6ull << 56;
constexpr uint64_t kKindMask = 0xffull << 56;

// What one session gets of the IPC thread per turn of its loop: frames read from its socket,
// and entries taken from its submission ring. Small enough that a flooding client delays the
// others by microseconds per turn; large enough that an honest burst needs few turns.
constexpr int kFramesPerTurn = 32;
constexpr uint32_t kEntriesPerTurn = 256;

}  // namespace

Server::Server(const config::DaemonConfig& config) : config_(config) {}

Server::~Server() {
  if (control_) control_->shutdown();
  if (peer_) peer_->shutdown();
  if (ownsSocketPath_) ::unlink(config_.socketPath.c_str());
}

Result<std::unique_ptr<Server>> Server::create(const config::DaemonConfig& config) {
  std::unique_ptr<Server> s(new Server(config));
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (::pthread_sigmask(SIG_BLOCK, &mask, nullptr) != 0) return internalError("sigmask");
  ::signal(SIGPIPE, SIG_IGN);
  s->signals_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!s->signals_.valid()) return systemError("signalfd", errno);
  s->epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!s->epoll_.valid()) return systemError("epoll_create1", errno);

  s->prefaulter_ = std::make_unique<session::Prefaulter>();
  s->policy_ = makeAccessPolicy(config.allowUids, config.allowGroups);
  s->pool_ = std::make_unique<coll::ReductionPool>(config::resolvedReductionThreads(config),
                                                    &s->heartbeats_);
  auto devices = buildDeviceRegistry(config);
  if (!devices.isOk()) return devices.status();
  s->devices_ = std::move(devices.value());
  metrics::BuildInfo build{.version = HC_VERSION, .ucx = transport::ucxVersion()};
#if defined(HC_HAVE_CUDA)
  build.cuda = true;
#endif
#if defined(HC_HAVE_HIP)
  build.rocm = true;
#endif
  s->metrics_ = std::make_unique<metrics::DaemonMetrics>(std::move(build));
  if (!config.metricsListen.empty()) {
    auto served = metrics::MetricsServer::start(config.metricsListen, *s->metrics_);
    if (!served.isOk()) return served.status();
    s->metricsServer_ = std::move(served.value());
  }
  s->deviceBoard_ = makeDeviceBoard(config, s->devices_, *s->metrics_);
  session::EngineOptions eo;
  eo.metrics = s->metrics_.get();
  eo.inlineBytes = config.inlineBytes;
  eo.initTimeoutMs = config.initTimeoutMs;
  eo.opTimeoutMs = config.opTimeoutMs;
  eo.stagingChunkBytes = config.stagingChunkBytes;
  static_assert(config::DaemonConfig::kMaxRanksLimit == peer::kMaxRanks);
  eo.maxRanks = config.maxRanks;
  eo.initAcrossUids = config.initAcrossUids;
  eo.maxStagingBytes = config.maxStagingBytes;
  eo.board = &s->board_;
  eo.stateDir = config.stateDir;
  eo.lateReportMs = config.lateReportMs;
  eo.flightRecordEntries = config.flightRecordEntries;
  // Test hook: the root's answer reaches this daemon late (its ranks' first messages arrive from
  // the other daemons before the communicator formed here).
  if (const char* delay = std::getenv("HC_TEST_JOIN_ANSWER_DELAY_MS")) {
    eo.joinAnswerDelay = std::chrono::milliseconds(std::strtoul(delay, nullptr, 10));
  }
  session::MultiNode multiNode;
  if (!config.peerListen.empty()) {
    auto peer =
        PeerSide::start(config, s->devices_, &s->board_, &s->heartbeats_, s->metrics_.get());
    if (!peer.isOk()) return peer.status();
    s->peer_ = std::move(peer.value());
    multiNode = s->peer_->multiNode();
    for (const auto& v : s->peer_->directVerdicts()) {
      const auto& info = v.device->info();
      s->metrics_->setDeviceDirect(
          info.backend + ":" + device::vendorName(info.vendor) + ":" + std::to_string(info.index),
          v.direct);
    }
  }
  s->engine_ = std::make_unique<session::Engine>(eo, s->pool_.get(), multiNode);

  auto listen = openClientSocket(config.socketPath, config.socketGroup, &s->ownsSocketPath_);
  if (!listen.isOk()) return listen.status();
  s->listen_ = std::move(listen.value());
  // After the client socket: the admin socket's default folder is the one it just created.
  auto control = ControlSide::start(config, *s->deviceBoard_,
                                     s->peer_ ? s->peer_->advertise() : "", &s->board_);
  if (!control.isOk()) return control.status();
  s->control_ = std::move(control.value());
  HC_RETURN_IF_ERROR(s->watch(s->listen_.get(), kListenTag, EPOLLIN));
  HC_RETURN_IF_ERROR(s->watch(s->signals_.get(), kSignalTag, EPOLLIN));
  HC_RETURN_IF_ERROR(s->watch(s->engine_->doneFd(), kDoneTag, EPOLLIN));
  if (s->engine_->netDoneFd() >= 0) {
    HC_RETURN_IF_ERROR(s->watch(s->engine_->netDoneFd(), kNetTag, EPOLLIN));
  }
  // Last: everything above is up, so the measurement's tens of milliseconds delay nobody.
  if (measuresAtStart(config)) s->deviceBoard_->measureInBackground();
  return s;
}

Status Server::watch(int fd, uint64_t tag, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return systemError("epoll_ctl", errno);
  return okStatus();
}

void Server::notifyStatus() {
  sd_notifyf(0, "STATUS=serving %zu clients on %s", sessions_.size(), config_.socketPath.c_str());
}

int Server::run() {
  // Before the "serving" line, which tells people and tests the daemon is ready.
  control_->markReady();
  spdlog::info("hetero-commd {} serving {} ({} reduction threads, spin {} us)", HC_VERSION,
               config_.socketPath, config::resolvedReductionThreads(config_), config_.spinUs);
  uint64_t watchdogUs = 0;
  if (sd_watchdog_enabled(0, &watchdogUs) > 0 && watchdogUs > 0) {
    watchdogEvery_ = std::max(std::chrono::milliseconds(1),
                              std::chrono::milliseconds(watchdogUs / 2000));
    spdlog::info("systemd watchdog: a heartbeat every {} ms", watchdogEvery_.count());
  }
  sd_notify(0, "READY=1");
  notifyStatus();
  const auto spin = std::chrono::microseconds(config_.spinUs);
  auto lastActivity = Clock::now();
  epoll_event events[64];
  for (;;) {
    if (stopping_ && engine_->idle()) break;
    int timeout = 0;
    bool sleeping = Clock::now() - lastActivity >= spin;
    if (sleeping) {
      setSleeping(1);
      // Pairs with the client's fence in wakeDaemonIfSleeping: either it sees the flag and rings
      // the eventfd, or this recheck sees its entry.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      timeout = ringsPending() ? 0 : sleepTimeoutMs();
    }
    int n = ::epoll_wait(epoll_.get(), events, 64, timeout);
    if (sleeping) setSleeping(0);
    bool active = n > 0;
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      uint64_t kind = tag & kKindMask;
      auto id = static_cast<uint32_t>(tag & ~kKindMask);
      if (kind == kListenTag) {
        acceptClients();
      } else if (kind == kSignalTag) {
        signalfd_siginfo si;
        while (::read(signals_.get(), &si, sizeof(si)) == sizeof(si)) {
          spdlog::info("signal {}: draining and stopping", si.ssi_signo);
        }
        beginShutdown();
      } else if (kind == kDoneTag) {
        engine_->collectFinished();
      } else if (kind == kNetTag) {
        engine_->collectNet();
      } else if (auto it = sessions_.find(id); it != sessions_.end()) {
        if (kind == kSocketTag) {
          onClientSocket(it->second);
        } else {
          uint64_t count;
          [[maybe_unused]] ssize_t r = ::read(it->second->eventFd(), &count, sizeof(count));
        }
      }
    }
    if (drainRings()) active = true;
    auto now = Clock::now();
    if (!helloDue_.empty()) closeSilentConnections(now);
    if (auto d = engine_->nextDeadline(); d && now >= *d) engine_->checkDeadlines(now);
    control_->markPeers(engine_->lostPeers());
    if (watchdogEvery_.count() > 0 && now - lastWatchdog_ >= watchdogEvery_) {
      // Only a loop that comes round sends it (a wedged IPC thread stops the heartbeat), and only
      // while the other loops turn too: a wedged reduction worker or progress thread stops it
      // as well, so that systemd restarts the daemon.
      const std::string stuck = heartbeats_.stuck(watchdogEvery_);
      if (stuck.empty()) {
        sd_notify(0, "WATCHDOG=1");
        lastWatchdog_ = now;
        withheld_ = false;
      } else if (!withheld_) {
        spdlog::error("watchdog: {} is stuck; withholding WATCHDOG=1", stuck);
        sd_notifyf(0, "STATUS=stuck: %s", stuck.c_str());
        withheld_ = true;
      }
    }
    if (active) {
      lastActivity = now;
    } else if (!sleeping) {
      // Polling: let the clients we wait for have the core (there are often fewer cores than
      // ranks plus daemon).
      ::sched_yield();
    }
  }
  for (auto& [id, s] : std::map(sessions_)) closeSession(s, unavailable("hetero-commd stopped"), false);
  sd_notify(0, "STATUS=stopped");
  spdlog::info("hetero-commd stopped");
  return 0;
}

void Server::setSleeping(uint32_t value) {
  for (auto& [id, s] : sessions_) {
    if (s->welcomed()) s->segment()->view().header->daemonSleeping.store(value, std::memory_order_relaxed);
  }
}

bool Server::ringsPending() const {
  for (const auto& [id, s] : sessions_) {
    if (!s->welcomed()) continue;
    // A session at its back-pressure limit waits for completions (which wake the loop), not
    // for another turn of it: the loop sleeps instead of spinning on its full ring.
    if (!s->segment()->view().submit.empty() && engine_->accepting(*s)) return true;
    // Completions parked because the ring was full: flush them once the client made room.
    if (s->hasParkedCompletions() && !s->segment()->view().completion.full()) return true;
  }
  return false;
}

void Server::closeSilentConnections(Clock::time_point now) {
  std::vector<session::SessionPtr> silent;
  for (const auto& [id, due] : helloDue_) {
    if (now < due) continue;
    if (auto it = sessions_.find(id); it != sessions_.end()) silent.push_back(it->second);
  }
  for (const auto& s : silent) {
    spdlog::warn("{}: no Hello within {} ms; closing the connection", s->describe(),
                 config_.helloTimeoutMs);
    closeSession(s, Status{Code::Timeout, "no Hello within " +
                                              std::to_string(config_.helloTimeoutMs) + " ms"},
                 true);
  }
}

Status Server::segmentBudget(const session::Session& s, const ipc::HelloFrame& hello) const {
  const uint64_t want = hello.segmentBytes == 0 ? config_.segmentBytes : hello.segmentBytes;
  const uint64_t held = segmentBytesOf(s.peer().uid);
  if (want <= config_.maxSegmentBytesPerUid && held <= config_.maxSegmentBytesPerUid - want) {
    return okStatus();
  }
  return Status{Code::NoResource,
                "uid " + std::to_string(s.peer().uid) + " holds " + std::to_string(held) +
                    " bytes of segments and asks for " + std::to_string(want) +
                    " more; session.max_segment_bytes_per_uid is " +
                    std::to_string(config_.maxSegmentBytesPerUid)};
}

size_t Server::connectionsOf(uid_t uid) const {
  size_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->peer().uid == uid ? 1 : 0;
  return n;
}

uint64_t Server::segmentBytesOf(uid_t uid) const {
  uint64_t bytes = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->welcomed() && s->peer().uid == uid) bytes += s->segment()->bytes();
  }
  return bytes;
}

int Server::sleepTimeoutMs() const {
  if (stopping_) return 20;
  int64_t limit = watchdogEvery_.count() > 0 ? watchdogEvery_.count() : -1;
  if (!helloDue_.empty()) {
    auto first = std::min_element(helloDue_.begin(), helloDue_.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first->second - Clock::now());
    const int64_t due = std::clamp<int64_t>(ms.count() + 1, 0, 60'000);
    limit = limit >= 0 ? std::min(limit, due) : due;
  }
  auto d = engine_->nextDeadline();
  if (!d) return static_cast<int>(limit);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*d - Clock::now()).count();
  ms = std::clamp<int64_t>(ms + 1, 0, 60'000);
  return static_cast<int>(limit >= 0 ? std::min(ms, limit) : ms);
}

bool Server::drainRings() {
  bool took = false;
  std::vector<std::pair<session::SessionPtr, Status>> broken;
  for (auto& [id, s] : sessions_) {
    if (!s->welcomed()) continue;
    auto r = engine_->drain(s, kEntriesPerTurn);
    if (!r.isOk()) {
      broken.emplace_back(s, r.status());
      continue;
    }
    took = took || *r;
  }
  for (auto& [s, why] : broken) closeSession(s, why, true);
  return took;
}

void Server::acceptClients() {
  for (;;) {
    UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("accept: {}", std::strerror(errno));
      }
      return;
    }
    auto refuse = [&](const Status& why) {
      spdlog::warn("refused a client: {}", why.message());
      [[maybe_unused]] Status s = sendMessage(fd.get(), ipc::frameBytes(ipc::makeErrorFrame(0, why)));
    };
    auto peer = checkPeer(fd.get(), policy_);
    if (!peer.isOk()) {
      refuse(peer.status());
      continue;
    }
    if (stopping_ || sessions_.size() >= config_.maxClients) {
      refuse(Status{Code::NoResource, stopping_ ? "hetero-commd is shutting down"
                                                : "too many clients (max_clients " +
                                                      std::to_string(config_.maxClients) + ")"});
      continue;
    }
    if (connectionsOf(peer->uid) >= config_.maxClientsPerUid) {
      refuse(Status{Code::NoResource,
                    "uid " + std::to_string(peer->uid) + " holds " +
                        std::to_string(config_.maxClientsPerUid) +
                        " connections already (session.max_clients_per_uid)"});
      continue;
    }
    uint32_t id = nextSessionId_++;
    int raw = fd.get();
    auto s = std::make_shared<session::Session>(id, std::move(fd), *peer);
    s->allowCrossMemoryAttach(config_.crossMemoryAttach);
    s->setDevices(&devices_);
    s->allowLegacyIpc(config_.devicesLegacyIpc);
    s->limitDeviceBytes(config_.devicesMaxImportedBytesPerClient);
    s->countDeviceImports(metrics_.get());
    s->setPrefaulter(prefaulter_.get());
    if (peer_) s->setPeerAddress(peer_->advertise());
    s->setDeviceEntrySource([board = deviceBoard_.get()] {
      return board == nullptr ? std::vector<ipc::DeviceEntry>{} : deviceEntriesOf(board->gpus());
    });
    if (!watch(raw, kSocketTag | id, EPOLLIN | EPOLLRDHUP).isOk()) continue;
    sessions_[id] = s;
    helloDue_[id] = Clock::now() + std::chrono::milliseconds(config_.helloTimeoutMs);
    metrics_->setClients(static_cast<int64_t>(sessions_.size()));
    board_.clientConnected(observe::ClientInfo{.id = id,
                                               .pid = peer->pid,
                                               .uid = peer->uid,
                                               .gid = peer->gid,
                                               .connectedNs = observe::wallClockNs()});
  }
}

void Server::onClientSocket(const session::SessionPtr& s) {
  // A turn of at most kFramesPerTurn frames: the socket stays readable and the loop comes back
  // to it after every other session's turn, so a client's flood of frames delays only itself.
  for (int frames = 0; frames < kFramesPerTurn; ++frames) {
    auto msg = receiveMessage(s->socketFd(), ipc::kMaxFrameBytes + 1);
    if (!msg.isOk()) {
      if (msg.status().code() == Code::NoResource) return;
      closeSession(s, unavailable(s->describe() + " disconnected"), false);
      return;
    }
    Status bad;
    if (msg->truncated || msg->bytes.size() > ipc::kMaxFrameBytes) {
      bad = invalidArgument("frame exceeds the " + std::to_string(ipc::kMaxFrameBytes) +
                            "-byte maximum");
    } else if (msg->fdsTruncated) {
      bad = invalidArgument("too many descriptors attached to a frame");
    } else {
      auto type = ipc::validateFrame(msg->bytes, msg->fds.size());
      if (type.isOk() && *type == ipc::FrameType::CommAbort && s->welcomed()) {
        engine_->abortHandle(s, ipc::frameAs<ipc::CommAbortFrame>(msg->bytes).commHandle);
        continue;
      }
      bool wasWelcomed = s->welcomed();
      if (!type.isOk()) {
        bad = type.status();
      } else if (*type == ipc::FrameType::Hello && !wasWelcomed) {
        bad = segmentBudget(*s, ipc::frameAs<ipc::HelloFrame>(msg->bytes));
      }
      if (bad.isOk()) {
        bad = s->handleFrame(msg->bytes, msg->fds, config_.segmentBytes, config_.maxSegmentBytes,
                             config_.ringEntries);
      }
      if (bad.isOk() && !wasWelcomed && s->welcomed()) {
        helloDue_.erase(s->id());
        if (!watch(s->eventFd(), kEventTag | s->id(), EPOLLIN).isOk()) {
          bad = internalError("cannot watch the client's eventfd");
        }
        board_.clientUpdated(s->id(), s->name(), s->segment()->bytes());
        notifyStatus();
      }
    }
    if (!bad.isOk()) {
      spdlog::warn("{}: {}; closing the connection", s->describe(), bad.message());
      closeSession(s, bad, true);
      return;
    }
  }
}

void Server::closeSession(session::SessionPtr s, const Status& why, bool tellClient) {
  if (tellClient) {
    [[maybe_unused]] Status st =
        sendMessage(s->socketFd(), ipc::frameBytes(ipc::makeErrorFrame(0, why)));
  }
  engine_->sessionClosed(s, why);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->socketFd(), nullptr);
  if (s->welcomed()) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->eventFd(), nullptr);
  sessions_.erase(s->id());
  helloDue_.erase(s->id());
  board_.clientGone(s->id());
  metrics_->setClients(static_cast<int64_t>(sessions_.size()));
  s->closeSocket();
  if (s->welcomed()) spdlog::info("{} closed: {}", s->describe(), why.message());
  notifyStatus();
}

void Server::beginShutdown() {
  if (stopping_) return;
  stopping_ = true;
  // Probes see the drain before anything else changes.
  control_->markDraining();
  sd_notify(0, "STOPPING=1");
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listen_.get(), nullptr);
  listen_.reset();
  if (ownsSocketPath_) ::unlink(config_.socketPath.c_str());
  ownsSocketPath_ = false;
  engine_->failPending(unavailable("hetero-commd is shutting down"));
}

}  // namespace hc::server
