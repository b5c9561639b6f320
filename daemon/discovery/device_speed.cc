#include "daemon/discovery/device_speed.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/status.h"

namespace hc::discovery {
namespace {

using Clock = std::chrono::steady_clock;

int64_t unixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The resources of one measurement, returned whatever happens.
class Bench {
 public:
  explicit Bench(device::Device& device) : device_(device) {}
  ~Bench() {
    if (stream_ != 0) (void)device_.destroyStream(stream_);
    for (void* p : deviceBuffers_) (void)device_.freeDevice(p);
    if (host_ != nullptr) (void)device_.freePinned(host_);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  Status setUp(size_t bytes) {
    auto stream = device_.createStream();
    if (!stream.isOk()) return annotate(stream.status(), "creating a stream");
    stream_ = *stream;
    auto host = device_.allocPinned(bytes);
    if (!host.isOk()) return annotate(host.status(), "allocating pinned host memory");
    host_ = *host;
    std::memset(host_, 0, bytes);  // touched once, so the first copy does not fault its pages in
    // The device buffers are left as they come: the sum of whatever floats they hold takes as
    // long as any other (GPUs raise no floating-point exceptions), and clearing them would cost
    // a full-size copy each, at the slow device's speed.
    for (int i = 0; i < 2; ++i) {
      auto buffer = device_.allocDevice(bytes);
      if (!buffer.isOk()) return annotate(buffer.status(), "allocating device memory");
      deviceBuffers_.push_back(*buffer);
    }
    return okStatus();
  }

  // Enqueues one step and waits for it; the elapsed time includes the enqueue, as a caller
  // of the device pays it.
  template <typename Enqueue>
  Result<Clock::duration> run(Enqueue enqueue) {
    const Clock::time_point start = Clock::now();
    HC_RETURN_IF_ERROR(enqueue());
    HC_RETURN_IF_ERROR(device_.synchronize(stream_));
    return Clock::now() - start;
  }

  Status copyIn(size_t bytes) {
    return device_.copyAsync(stream_, deviceBuffers_[0], host_, bytes);
  }
  Status copyOut(size_t bytes) {
    return device_.copyAsync(stream_, host_, deviceBuffers_[0], bytes);
  }
  Status reduce(size_t bytes) {
    const void* inputs[2] = {deviceBuffers_[0], deviceBuffers_[1]};
    void* outputs[1] = {deviceBuffers_[1]};
    device::ReduceWork work;
    work.dtype = Dtype::Float32;
    work.redop = RedOp::Sum;
    work.inputs = inputs;
    work.outputs = outputs;
    work.nRanks = 2;
    work.count = bytes / sizeof(float);
    return device_.reduceAsync(stream_, work);
  }

 private:
  static Status annotate(const Status& status, const char* what) {
    return Status(status.code(), std::string(what) + ": " + std::string(status.message()));
  }

  device::Device& device_;
  device::StreamId stream_ = 0;
  void* host_ = nullptr;
  std::vector<void*> deviceBuffers_;
};

constexpr const char* kCancelled = "measurement cancelled";

bool stopped(const std::atomic<bool>* stop) {
  return stop != nullptr && stop->load(std::memory_order_relaxed);
}

// GB/s of the best of options.repetitions runs of `step` over a size that takes at least
// minStepTime (or maxBytes). Cancelled when `stop` is set before a run.
template <typename Step>
Result<double> timeStep(Bench& bench, const SpeedOptions& options, const std::atomic<bool>* stop,
                        Step step) {
  size_t bytes = options.minBytes;
  for (;;) {
    if (stopped(stop)) return unavailable(kCancelled);
    auto elapsed = bench.run([&] { return step(bytes); });
    if (!elapsed.isOk()) return elapsed.status();
    if (*elapsed >= options.minStepTime || bytes * 2 > options.maxBytes) break;
    bytes *= 2;
  }
  Clock::duration best = Clock::duration::max();
  for (int i = 0; i < std::max(1, options.repetitions); ++i) {
    if (stopped(stop)) return unavailable(kCancelled);
    auto elapsed = bench.run([&] { return step(bytes); });
    if (!elapsed.isOk()) return elapsed.status();
    best = std::min(best, *elapsed);
  }
  const double seconds = std::chrono::duration<double>(best).count();
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

DeviceSpeed notMeasured(std::string why) {
  DeviceSpeed speed;
  speed.note = std::move(why);
  return speed;
}

}  // namespace

DeviceSpeed measureDeviceSpeed(device::Device& device, const SpeedOptions& options,
                               const std::atomic<bool>* stop) {
  if (!device.capabilities().reduceKernels)
    return notMeasured("the device has no reduction kernel");
  Bench bench(device);
  const size_t maxBytes = std::max(options.minBytes, options.maxBytes);
  if (Status status = bench.setUp(maxBytes); !status.isOk()) {
    return notMeasured(std::string(status.message()));
  }
  DeviceSpeed speed;
  struct Step {
    const char* name;
    double* gbps;
    Status (Bench::*enqueue)(size_t);
  };
  const Step steps[] = {{"host to device copy", &speed.h2dGBps, &Bench::copyIn},
                        {"device to host copy", &speed.d2hGBps, &Bench::copyOut},
                        {"sum kernel", &speed.reduceGBps, &Bench::reduce}};
  for (const Step& step : steps) {
    auto gbps =
        timeStep(bench, options, stop, [&](size_t bytes) { return (bench.*step.enqueue)(bytes); });
    if (!gbps.isOk()) {
      if (stopped(stop)) return notMeasured(kCancelled);
      return notMeasured(std::string(step.name) + ": " + gbps.status().message());
    }
    if (*gbps <= 0) return notMeasured(std::string(step.name) + " took no measurable time");
    *step.gbps = *gbps;
  }
  speed.rateGBps = 1.0 / (1.0 / speed.h2dGBps + 1.0 / speed.d2hGBps + 1.0 / speed.reduceGBps);
  speed.measured = true;
  speed.measuredUnixMs = unixMillisNow();
  return speed;
}

std::vector<DeviceSpeed> measureDeviceSpeeds(const std::vector<GpuRow>& gpus,
                                             const device::DeviceRegistry& registry,
                                             const SpeedOptions& options,
                                             const std::atomic<bool>* stop) {
  std::vector<DeviceSpeed> speeds;
  speeds.reserve(gpus.size());
  for (const GpuRow& row : gpus) {
    if (stopped(stop)) {
      speeds.push_back(notMeasured(kCancelled));
      continue;
    }
    device::Device* device = nullptr;
    for (const device::DevicePtr& candidate : registry.devices()) {
      const device::DeviceInfo& info = candidate->info();
      if (row.deviceIndex >= 0 && info.index == row.deviceIndex &&
          row.vendor == device::vendorName(info.vendor) && row.backend == info.backend) {
        device = candidate.get();
        break;
      }
    }
    speeds.push_back(device ? measureDeviceSpeed(*device, options, stop)
                            : notMeasured("no runtime drives this GPU"));
  }
  assignWeights(speeds);
  return speeds;
}

void assignWeights(std::vector<DeviceSpeed>& speeds) {
  double fastest = 0;
  for (const DeviceSpeed& speed : speeds) {
    if (speed.measured) fastest = std::max(fastest, speed.rateGBps);
  }
  for (DeviceSpeed& speed : speeds)
    speed.weight = speed.measured && fastest > 0 ? speed.rateGBps / fastest : 0;
}

}  // namespace hc::discovery
