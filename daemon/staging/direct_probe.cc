#include "daemon/staging/direct_probe.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include <spdlog/spdlog.h>

namespace hc::staging {
namespace {

using Clock = std::chrono::steady_clock;
using transport::MemoryKind;

// The probe talks to itself before any communicator exists, so no real tag is in use yet.
constexpr transport::Tag kProbeTag = transport::makeTag(transport::kProbeIdentity, 0, 0);

std::optional<MemoryKind> wireKind(device::MemoryType type) {
  switch (type) {
    case device::MemoryType::Host:
      return MemoryKind::Host;
    case device::MemoryType::Cuda:
      return MemoryKind::Cuda;
    case device::MemoryType::Hip:
      return MemoryKind::Rocm;
    case device::MemoryType::Sim:
      break;
  }
  return std::nullopt;
}

double fastest(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

void fill(std::vector<uint8_t>& bytes, uint32_t seed) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    bytes[i] = static_cast<uint8_t>(seed >> 24);
  }
}

// One device's probe: its memory, a stream, host buffers, and the transport to itself.
class Probe {
 public:
  Probe(transport::Transport& t, device::Device& d, MemoryKind kind, size_t bytes,
        std::chrono::milliseconds timeout)
      : t_(t), d_(d), kind_(kind), bytes_(bytes), timeout_(timeout) {}

  ~Probe() {
    if (self_) (void)t_.disconnect(*self_);
    if (stream_ != 0) (void)d_.destroyStream(stream_);
    if (mem_ != nullptr) (void)d_.freeDevice(mem_);
  }

  Status open() {
    auto mem = d_.allocDevice(bytes_);
    if (!mem.isOk()) return mem.status();
    mem_ = *mem;
    auto stream = d_.createStream();
    if (!stream.isOk()) return stream.status();
    stream_ = *stream;
    auto self = t_.connect(t_.address());
    if (!self.isOk()) return self.status();
    self_ = *self;
    for (auto* b : {&a_, &b_, &c_}) b->assign(bytes_, 0);
    return okStatus();
  }

  // Device memory out to host memory, in place; then host memory into device memory.
  Result<double> direct(uint32_t seed) {
    fill(a_, seed);
    HC_RETURN_IF_ERROR(toDevice(a_));
    const auto start = Clock::now();
    HC_RETURN_IF_ERROR(transfer(mem_, kind_, b_.data(), MemoryKind::Host));
    double ms = elapsedMs(start);
    if (b_ != a_) return mismatch("out of");
    fill(a_, seed + 1);
    const auto back = Clock::now();
    HC_RETURN_IF_ERROR(transfer(a_.data(), MemoryKind::Host, mem_, kind_));
    ms += elapsedMs(back);
    HC_RETURN_IF_ERROR(fromDevice(b_));
    if (b_ != a_) return mismatch("into");
    return ms;
  }

  // The same round trip as the daemon stages it: a device copy on each side of the wire.
  Result<double> staged() {
    const auto start = Clock::now();
    HC_RETURN_IF_ERROR(fromDevice(c_));
    HC_RETURN_IF_ERROR(transfer(c_.data(), MemoryKind::Host, b_.data(), MemoryKind::Host));
    HC_RETURN_IF_ERROR(transfer(b_.data(), MemoryKind::Host, c_.data(), MemoryKind::Host));
    HC_RETURN_IF_ERROR(toDevice(c_));
    return elapsedMs(start);
  }

 private:
  static double elapsedMs(Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  }
  Status mismatch(const char* direction) {
    return Status(Code::DeviceError, std::string("bytes moved ") + direction +
                                         " device memory in place arrived changed");
  }
  Status toDevice(const std::vector<uint8_t>& from) {
    HC_RETURN_IF_ERROR(d_.copyAsync(stream_, mem_, from.data(), bytes_));
    return d_.synchronize(stream_);
  }
  Status fromDevice(std::vector<uint8_t>& to) {
    HC_RETURN_IF_ERROR(d_.copyAsync(stream_, to.data(), mem_, bytes_));
    return d_.synchronize(stream_);
  }

  // One message from `src` to `dst` through the transport to itself, waited for (bounded).
  Status transfer(const void* src, MemoryKind srcKind, void* dst, MemoryKind dstKind) {
    auto recv = t_.postRecv(*self_, kProbeTag, dst, bytes_, dstKind);
    if (!recv.isOk()) return recv.status();
    auto send = t_.postSend(*self_, kProbeTag, src, bytes_, srcKind);
    if (!send.isOk()) {
      (void)t_.cancel(*recv);
      HC_RETURN_IF_ERROR(wait(*recv));
      return send.status();
    }
    Status sent = wait(*send);
    Status received = wait(*recv);
    return sent.isOk() ? received : sent;
  }

  Status wait(transport::RequestId id) {
    const auto deadline = Clock::now() + timeout_;
    size_t got = 0;
    for (;;) {
      t_.progress();
      auto done = t_.test(id, &got);
      if (!done.isOk()) return done.status();
      if (*done) return got == bytes_ ? okStatus() : internalError("probe message cut short");
      if (Clock::now() > deadline) {
        abandon(id);
        return Status(Code::Timeout,
                      "a probe transfer took over " + std::to_string(timeout_.count()) + " ms");
      }
      pollfd fd{t_.eventFd(), POLLIN, 0};
      if (fd.fd >= 0) (void)::poll(&fd, 1, 1);
    }
  }

  // A request that outlived its deadline: cancelled, and if the transport still holds it after
  // one more timeout, its memory is left allocated rather than freed under it.
  void abandon(transport::RequestId id) {
    (void)t_.cancel(id);
    const auto deadline = Clock::now() + timeout_;
    while (Clock::now() < deadline) {
      t_.progress();
      auto done = t_.test(id);
      if (!done.isOk() || *done) return;
      pollfd fd{t_.eventFd(), POLLIN, 0};
      if (fd.fd >= 0) (void)::poll(&fd, 1, 1);
    }
    spdlog::warn("device probe: the transport still holds a probe buffer; it stays allocated");
    mem_ = nullptr;
    for (auto* b : {&a_, &b_, &c_}) new std::vector<uint8_t>(std::move(*b));  // never freed
  }

  transport::Transport& t_;
  device::Device& d_;
  const MemoryKind kind_;
  const size_t bytes_;
  const std::chrono::milliseconds timeout_;
  void* mem_ = nullptr;
  device::StreamId stream_ = 0;
  std::optional<transport::PeerId> self_;
  std::vector<uint8_t> a_, b_, c_;  // host memory: what goes in, what comes out, staging
};

}  // namespace

DirectVerdict probeDirect(transport::Transport& transport, device::Device& device,
                          const DirectProbeOptions& options) {
  DirectVerdict v;
  v.device = &device;
  const auto& types = device.capabilities().transportMemory;
  if (device.info().vendor == device::Vendor::Host) {
    v.why = "host memory needs no staging";
    return v;
  }
  std::optional<MemoryKind> kind = types.empty() ? std::nullopt : wireKind(types.front());
  if (!kind) {
    v.why = "its memory reaches a transport only through host copies";
    return v;
  }
  v.kind = *kind;
  if (!transport.movesMemory(*kind)) {
    v.why = "transport " + std::string(transport.name()) + " moves no " +
            transport::memoryKindName(*kind) + " memory";
    return v;
  }
  Probe probe(transport, device, *kind, std::max(options.bytes, transport.directMinBytes()),
              options.timeout);
  if (Status open = probe.open(); !open.isOk()) {
    v.why = "probe could not start: " + open.message();
    return v;
  }
  std::vector<double> direct, staged;
  for (int r = 0; r < std::max(options.rounds, 1); ++r) {
    auto d = probe.direct(static_cast<uint32_t>(r) * 2 + 1);
    if (!d.isOk()) {
      v.why = "probe failed: " + d.status().message();
      return v;
    }
    auto s = probe.staged();
    if (!s.isOk()) {
      v.why = "probe failed while staging: " + s.status().message();
      return v;
    }
    direct.push_back(*d);
    staged.push_back(*s);
  }
  v.directMs = fastest(direct);
  v.stagedMs = fastest(staged);
  v.direct = v.directMs <= v.stagedMs;
  v.why = fmt::format("{} a round trip in place in {:.3f} ms against {:.3f} ms staged",
                      v.direct ? "zero copy:" : "slower than staging:", v.directMs, v.stagedMs);
  return v;
}

std::optional<transport::MemoryKind> DirectDevices::kindOf(const device::Device* device) const {
  auto it = kinds_.find(device);
  if (it == kinds_.end()) return std::nullopt;
  return it->second;
}

DirectDevices probeDirectDevices(transport::Transport& transport,
                                 const device::DeviceRegistry& devices,
                                 const DirectProbeOptions& options,
                                 std::vector<DirectVerdict>* verdicts) {
  DirectDevices direct;
  direct.minBytes = transport.directMinBytes();
  for (const auto& device : devices.devices()) {
    if (device->info().vendor == device::Vendor::Host) continue;
    DirectVerdict v = probeDirect(transport, *device, options);
    spdlog::info("device {}: {} ({})", device::deviceLabel(device->info()),
                 v.direct ? "transfers go device-direct" : "staged through host memory", v.why);
    if (v.direct) direct.add(device.get(), v.kind);
    if (verdicts != nullptr) verdicts->push_back(std::move(v));
  }
  return direct;
}

}  // namespace hc::staging
