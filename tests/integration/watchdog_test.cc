// systemd's watchdog without PID 1: the test owns NOTIFY_SOCKET and sets WATCHDOG_USEC, as
// systemd does for a unit with WatchdogSec=. An idle daemon pings at half the interval; a loop
// that stops turning stops the pings, so systemd would restart the daemon. The stuck loop here is
// real: a device copy on a simulated stream slowed to seconds per task (devices.sim.
// slow_stream_us) holds the IPC loop, which waits for its staging copies.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_job.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The notify socket: a thread collects every message with the time it arrived.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ::unlink(path.c_str());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval timeout{0, 100'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    thread_ = std::thread([this] { collect(); });
  }
  ~NotifyListener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool bound() const { return bound_; }

  // Arrival times of messages holding `text`.
  std::vector<Clock::time_point> times(const std::string& text) {
    std::lock_guard lock(mutex_);
    std::vector<Clock::time_point> out;
    for (const auto& [when, message] : messages_) {
      if (message.find(text) != std::string::npos) out.push_back(when);
    }
    return out;
  }

 private:
  void collect() {
    char buffer[4096];
    while (!stop_) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) continue;
      std::lock_guard lock(mutex_);
      messages_.emplace_back(Clock::now(), std::string(buffer, static_cast<size_t>(n)));
    }
  }

  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::pair<Clock::time_point, std::string>> messages_;
  std::thread thread_;
};

// The longest gap between consecutive pings within [from, to].
milliseconds longestGap(const std::vector<Clock::time_point>& pings, Clock::time_point from,
                        Clock::time_point to) {
  milliseconds longest{0};
  Clock::time_point previous = from;
  for (Clock::time_point t : pings) {
    if (t < from || t > to) continue;
    longest = std::max(longest, std::chrono::duration_cast<milliseconds>(t - previous));
    previous = t;
  }
  return std::max(longest, std::chrono::duration_cast<milliseconds>(to - previous));
}

TEST(WatchdogTest, PingsStopWhileALoopIsStuckAndResumeAfterwards) {
  const test::TempDir dir("hc-watchdog");
  NotifyListener notify(dir.file("notify.sock"));
  ASSERT_TRUE(notify.bound());
  DaemonProcess::Launch launch;
  launch.env = {{"NOTIFY_SOCKET", dir.file("notify.sock")}, {"WATCHDOG_USEC", "2000000"}};
  std::string error;
  auto daemon = DaemonProcess::start({"--set", "devices.sim.nvidia=1", "--set",
                                      "devices.sim.slow_stream_us=3000000"},
                                     launch, &error);
  ASSERT_NE(daemon, nullptr) << error;

  // Idle: a ping at least every second (half of the 2 s interval).
  std::this_thread::sleep_for(milliseconds(3500));
  const Clock::time_point idleEnd = Clock::now();
  const auto idleFrom = idleEnd - milliseconds(3000);
  EXPECT_LT(longestGap(notify.times("WATCHDOG=1"), idleFrom, idleEnd), milliseconds(1500))
      << daemon->logTail();

  // One device allreduce: its staging copies take 3 s each on the slowed stream, and the IPC
  // loop waits for them.
  auto job = RankJob::start(*daemon, "stuck", 1,
                            {"--mode", "deviceops", "--count", "64", "--iters", "1", "--device",
                             "sim:nvidia:0"},
                            &error);
  ASSERT_NE(job, nullptr) << error;
  const Clock::time_point jobStart = Clock::now();
  ASSERT_TRUE(job->waitAll(seconds(60))) << job->report() << daemon->logTail();
  const Clock::time_point jobEnd = Clock::now();
  EXPECT_GT(longestGap(notify.times("WATCHDOG=1"), jobStart, jobEnd), milliseconds(2000))
      << "systemd would not have seen the stuck loop\n"
      << daemon->logTail();

  // Turning again: pings resume.
  std::this_thread::sleep_for(milliseconds(2500));
  const Clock::time_point after = Clock::now();
  EXPECT_LT(longestGap(notify.times("WATCHDOG=1"), after - milliseconds(2000), after),
            milliseconds(1500))
      << daemon->logTail();
  EXPECT_EQ(daemon->stop(), 0);
}

}  // namespace
}  // namespace hc::integ
