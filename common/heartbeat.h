// Heartbeats: how the daemon's loops show systemd's watchdog that they still turn. Each loop (the
// IPC loop, the NetExecutor's progress thread, each reduction worker) holds a Heartbeat from the
// board, beats on every pass, and says when it sleeps waiting for work: a sleeping loop is not
// stuck, however long it sleeps. The IPC loop sends WATCHDOG=1 only while no loop is stuck (busy
// and silent past a limit), so a wedged reduction or progress thread gets the daemon restarted
// like a wedged IPC loop would.
// Header-only, standard library only; any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hc {

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Heartbeat(std::string name) : name_(std::move(name)) { beat(); }

  // The loop made a pass (or one more piece of a long job).
  void beat() { lastNs_.store(nowNs(), std::memory_order_relaxed); }
  // Around a wait for work with no deadline of the loop's own: true before, false after.
  void sleeping(bool asleep) {
    beat();
    asleep_.store(asleep, std::memory_order_relaxed);
  }

  const std::string& name() const { return name_; }
  // How long the loop has been busy without a beat; zero while it sleeps.
  std::chrono::nanoseconds silentFor(Clock::time_point now) const {
    if (asleep_.load(std::memory_order_relaxed)) return std::chrono::nanoseconds(0);
    const int64_t last = lastNs_.load(std::memory_order_relaxed);
    return std::chrono::nanoseconds(std::max<int64_t>(0, ns(now) - last));
  }

 private:
  static int64_t ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  static int64_t nowNs() { return ns(Clock::now()); }

  const std::string name_;
  std::atomic<int64_t> lastNs_{0};
  std::atomic<bool> asleep_{false};
};

class HeartbeatBoard {
 public:
  std::shared_ptr<Heartbeat> add(std::string name) {
    auto beat = std::make_shared<Heartbeat>(std::move(name));
    std::lock_guard lock(mutex_);
    beats_.push_back(beat);
    return beat;
  }

  // "hc-reduce-1 (silent for 2300 ms)" for the first loop busy without a beat for longer than
  // `limit`; "" when every loop turns or sleeps. Loops whose Heartbeat was dropped are forgotten.
  std::string stuck(std::chrono::nanoseconds limit,
                    Heartbeat::Clock::time_point now = Heartbeat::Clock::now()) {
    std::lock_guard lock(mutex_);
    std::erase_if(beats_, [](const std::weak_ptr<Heartbeat>& w) { return w.expired(); });
    for (const auto& weak : beats_) {
      auto beat = weak.lock();
      if (!beat) continue;
      const auto silent = beat->silentFor(now);
      if (silent > limit) {
        return beat->name() + " (silent for " +
               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
               " ms)";
      }
    }
    return {};
  }

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<Heartbeat>> beats_;
};

}  // namespace hc
