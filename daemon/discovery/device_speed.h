// How fast each GPU of the node moves and combines a collective's bytes, timed through the
// Device interface: copies from pinned host memory to the device and back, and the float32 sum
// kernel over two device buffers. A framework gives a faster GPU a bigger share of the work by
// these figures (GpuRow::speed, DeviceSpeed in inventory.h), so they must compare devices of
// different vendors on one scale: every device runs the same three timed steps.
// Depends on hc_device only (and the inventory's row types).
//
// Cost: a few tens of milliseconds per GPU, up to a few hundred for a slow one (each step is timed
// over a size that takes at least SpeedOptions::minStepTime, up to maxBytes, best of
// `repetitions`). Control path: the daemon
// measures once at startup on a thread of its own, and again when an operator asks
// (`hcctl devices --measure`); the device's streams are its own, so running jobs are slowed but
// never disturbed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <vector>

#include "daemon/device/registry.h"
#include "daemon/discovery/inventory.h"

namespace hc::discovery {

struct SpeedOptions {
  // A step starts at minBytes and doubles until one run takes minStepTime or maxBytes is reached:
  // large enough that launch latency and a late wake-up (a millisecond on a busy machine) count
  // little, small enough that a slow device is quick. A GPU reaches maxBytes first (16 MiB cross
  // PCIe in about a millisecond); only slow devices run the full minStepTime.
  size_t minBytes = 256 << 10;
  size_t maxBytes = 16 << 20;
  std::chrono::microseconds minStepTime{10000};
  int repetitions = 5;  // the best run of each step counts (the least disturbed)
};

// Times one device. Not measured (measured false, `note` set) when the device has no memory of
// its own or no reduction kernel, or a step failed (the note names the step and the device's
// error). `stop` (may be null) is checked before every timed run: a set flag ends the
// measurement at once with the note "measurement cancelled" (a daemon stopping right after it
// started must not wait for a slow device's figures). Never throws.
DeviceSpeed measureDeviceSpeed(device::Device& device, const SpeedOptions& options = {},
                               const std::atomic<bool>* stop = nullptr);

// Times every GPU row that a registry device runs (in row order, one device at a time so they do
// not share the host's memory bandwidth), then sets each measured row's weight relative to the
// fastest. Rows without a runtime device (backend "none") get the note "no runtime drives this
// GPU". A set `stop` leaves the device being measured and the rest unmeasured with the note
// "measurement cancelled". Returns one DeviceSpeed per row.
std::vector<DeviceSpeed> measureDeviceSpeeds(const std::vector<GpuRow>& gpus,
                                             const device::DeviceRegistry& registry,
                                             const SpeedOptions& options = {},
                                             const std::atomic<bool>* stop = nullptr);

// Sets `weight` of each measured entry to rateGBps / the highest rateGBps (1.0 for the fastest);
// unmeasured entries keep 0.
void assignWeights(std::vector<DeviceSpeed>& speeds);

}  // namespace hc::discovery
