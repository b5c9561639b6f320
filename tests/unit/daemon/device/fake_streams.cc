#include "tests/unit/daemon/device/fake_streams.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace hc::device::testing {
namespace {

constexpr auto kWaitPollInterval = std::chrono::microseconds(100);

bool satisfied(uint32_t current, uint32_t value, WaitCompare compare, uint32_t mask) {
  if (compare == WaitCompare::CudaGeq) {
    return static_cast<int32_t>(current - value) >= 0;
  }
  return (current & mask) >= value;
}

}  // namespace

FakeStreamLog::FakeStreamLog(const char* fileVariable) {
  const char* path = fileVariable != nullptr ? std::getenv(fileVariable) : nullptr;
  if (path != nullptr && *path != '\0') file_ = std::fopen(path, "a");
}

FakeStreamLog::~FakeStreamLog() {
  if (file_ != nullptr) std::fclose(file_);
}

uint64_t FakeStreamLog::append(const std::string& stream, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t seq = next_++;
  const std::string line = std::to_string(seq) + " " + stream + " " + what + "\n";
  text_ += line;
  if (file_ != nullptr) {
    std::fputs(line.c_str(), file_);
    std::fflush(file_);  // the process may end by a signal: what happened so far is on disk
  }
  return seq;
}

std::string FakeStreamLog::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return text_;
}

size_t FakeStreamLog::copy(char* out, size_t capacity) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (out != nullptr && capacity > 0) {
    const size_t n = std::min(capacity - 1, text_.size());
    std::memcpy(out, text_.data(), n);
    out[n] = '\0';
  }
  return text_.size();
}

FakeStream::FakeStream(std::string name, FakeStreamLog& log)
    : name_(std::move(name)), log_(log), worker_([this] { workerLoop(); }) {}

FakeStream::~FakeStream() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return queue_.empty() && !running_; });
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void FakeStream::enqueue(Item item) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(item));
  }
  changed_.notify_all();
}

void FakeStream::hostFunction(HostFn fn, void* arg) {
  enqueue(Item{"host-fn", "end", [fn, arg] { fn(arg); }});
}

void FakeStream::waitValue32(const volatile uint32_t* word, uint32_t value, WaitCompare compare,
                             uint32_t mask) {
  char what[96];
  std::snprintf(what, sizeof(what), "wait %p >= %u", const_cast<const uint32_t*>(word), value);
  enqueue(Item{what, "satisfied", [word, value, compare, mask] {
                 // The word lies in host memory another thread (the daemon, through the shared
                 // segment) writes: read it as the GPU would, with acquire ordering.
                 auto* atomicWord =
                     reinterpret_cast<const std::atomic<uint32_t>*>(const_cast<uint32_t*>(word));
                 while (!satisfied(atomicWord->load(std::memory_order_acquire), value, compare,
                                   mask)) {
                   std::this_thread::sleep_for(kWaitPollInterval);
                 }
               }});
}

void FakeStream::kernel(const std::string& label, int delayMs, HostFn fn, void* arg) {
  enqueue(Item{"kernel " + label, "end", [delayMs, fn, arg] {
                 if (delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
                 if (fn != nullptr) fn(arg);
               }});
}

void FakeStream::copy(void* dst, const void* src, size_t bytes) {
  enqueue(Item{"copy " + std::to_string(bytes) + " bytes", "end",
               [dst, src, bytes] { std::memcpy(dst, src, bytes); }});
}

void FakeStream::runInOrder(const std::function<void()>& work) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !running_; });
  // Marked running, so that work queued meanwhile by another thread waits for this.
  running_ = true;
  lock.unlock();
  work();
  lock.lock();
  running_ = false;
  lock.unlock();
  changed_.notify_all();
}

void FakeStream::synchronize() {
  // Waits for the queue to drain. Work queued by another thread meanwhile is waited for too,
  // which the driver does not promise but no caller can tell apart.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !running_; });
}

bool FakeStream::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && !running_;
}

void FakeStream::setCapturing(bool capturing) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = capturing;
}

bool FakeStream::capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capturing_;
}

void FakeStream::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || (!queue_.empty() && !running_); });
    if (queue_.empty()) return;  // stopping_, and nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    log_.append(name_, item.what + " begin");
    item.run();
    log_.append(name_, item.what + " " + item.endWord);
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace hc::device::testing
