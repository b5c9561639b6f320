// DeviceBoard: the node's inventory as the daemon serves it, the GPU rows taken at startup with
// their latest measured speeds (device_speed.h). The control plane, the metrics and client
// sessions read it while a measurement runs, so every method is thread-safe; a measurement
// holds no lock that readers wait on (rows are copied out, measured, and published back).
// Depends on hc_device and this folder only.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/device/registry.h"
#include "daemon/discovery/device_speed.h"
#include "daemon/discovery/inventory.h"

namespace hc::discovery {

class DeviceBoard {
 public:
  // Called after each measurement is published, with the rows as they now are (the daemon sets
  // its Prometheus gauges from it). On the measuring thread; must not call back into the board's
  // measure methods.
  using PublishedCallback = std::function<void(const std::vector<GpuRow>& gpus)>;

  // `registry` is borrowed and must outlive the board. Rows start unmeasured with `pendingNote`
  // ("measuring", or why nothing will be measured until someone asks).
  DeviceBoard(Inventory inventory, const device::DeviceRegistry& registry,
              SpeedOptions options = {}, std::string pendingNote = "measuring");
  // Cancels a background measurement between devices and joins it.
  ~DeviceBoard();
  DeviceBoard(const DeviceBoard&) = delete;
  DeviceBoard& operator=(const DeviceBoard&) = delete;

  void setPublishedCallback(PublishedCallback callback);  // before the first measurement

  Inventory inventory() const;  // a copy: GPU rows with their latest speeds, NICs, notes
  std::vector<GpuRow> gpus() const;

  // Measures every GPU on a thread of the board's own and returns at once. At most once.
  void measureInBackground();
  // Measures now, on the caller's thread, after any measurement under way has finished (two
  // never overlap: they would halve each other's figures), publishes and returns the rows.
  // Blocks for a few tens of milliseconds per GPU: control path only.
  std::vector<GpuRow> measureNow();

 private:
  std::vector<GpuRow> measureAndPublish();

  const device::DeviceRegistry& registry_;
  const SpeedOptions options_;
  PublishedCallback published_;
  mutable std::mutex mu_;  // guards inventory_
  Inventory inventory_;
  std::mutex measuring_;  // held for the whole of one measurement
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

}  // namespace hc::discovery
