#include "daemon/discovery/device_board.h"

namespace hc::discovery {

DeviceBoard::DeviceBoard(Inventory inventory, const device::DeviceRegistry& registry,
                         SpeedOptions options, std::string pendingNote)
    : registry_(registry), options_(options), inventory_(std::move(inventory)) {
  for (GpuRow& row : inventory_.gpus) {
    row.speed = DeviceSpeed{};
    row.speed.note = row.deviceIndex < 0 ? "no runtime drives this GPU" : pendingNote;
  }
}

DeviceBoard::~DeviceBoard() {
  stop_.store(true, std::memory_order_relaxed);
  if (worker_.joinable()) worker_.join();
}

void DeviceBoard::setPublishedCallback(PublishedCallback callback) {
  published_ = std::move(callback);
}

Inventory DeviceBoard::inventory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inventory_;
}

std::vector<GpuRow> DeviceBoard::gpus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return inventory_.gpus;
}

void DeviceBoard::measureInBackground() {
  if (worker_.joinable()) return;
  worker_ = std::thread([this] { measureAndPublish(); });
}

std::vector<GpuRow> DeviceBoard::measureNow() { return measureAndPublish(); }

std::vector<GpuRow> DeviceBoard::measureAndPublish() {
  std::lock_guard<std::mutex> measuring(measuring_);
  // Rows never change after construction, only their speeds: measure a copy, unlocked.
  std::vector<DeviceSpeed> speeds = measureDeviceSpeeds(gpus(), registry_, options_, &stop_);
  std::vector<GpuRow> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < inventory_.gpus.size() && i < speeds.size(); ++i) {
      inventory_.gpus[i].speed = std::move(speeds[i]);
    }
    rows = inventory_.gpus;
  }
  if (published_) published_(rows);
  return rows;
}

}  // namespace hc::discovery
