#include "daemon/observe/flight_dumper.h"

#include <grp.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "daemon/observe/flight_json.h"

namespace hc::observe {

FlightDumper::FlightDumper(Options options, Done onDone)
    : options_(std::move(options)),
      readerGid_(lookUpGroup(options_.readerGroup)),
      onDone_(std::move(onDone)),
      tokens_(options_.burst),
      refilled_(std::chrono::steady_clock::now()),
      thread_([this] { run(); }) {}

FlightDumper::~FlightDumper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool FlightDumper::submit(FlightSnapshot snapshot, std::string reason, std::string detail,
                          std::string what) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const double minutes = std::chrono::duration<double>(now - refilled_).count() / 60.0;
  tokens_ = std::min<double>(options_.burst, tokens_ + minutes * options_.perMinute);
  refilled_ = now;
  if (tokens_ < 1.0 || queue_.size() >= options_.maxQueued) {
    ++skipped_;
    return false;
  }
  tokens_ -= 1.0;
  queue_.push_back(Job{std::move(snapshot), std::move(reason), std::move(detail), std::move(what)});
  wake_.notify_one();
  return true;
}

uint64_t FlightDumper::skipped() const {
  std::lock_guard lock(mutex_);
  return skipped_;
}

void FlightDumper::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is written
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Result<std::string> path =
        dumpFlightRecord(options_.stateDir, job.snapshot, job.reason, job.detail, readerGid_);
    if (path.isOk()) rotate();
    if (onDone_) onDone_(path, job.what);
  }
}

std::optional<gid_t> FlightDumper::lookUpGroup(const std::string& name) {
  if (name.empty()) return std::nullopt;
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) !=
          0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return found->gr_gid;
}

void FlightDumper::rotate() const {
  namespace fs = std::filesystem;
  struct Dump {
    fs::file_time_type written;
    fs::path path;
  };
  std::vector<Dump> dumps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.stateDir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || !name.starts_with("flight-") || !name.ends_with(".json")) {
      continue;
    }
    dumps.push_back(Dump{entry.last_write_time(ec), entry.path()});
  }
  if (dumps.size() <= options_.keepFiles) return;
  std::sort(dumps.begin(), dumps.end(),
            [](const Dump& a, const Dump& b) { return a.written < b.written; });
  for (size_t i = 0; i + options_.keepFiles < dumps.size(); ++i) fs::remove(dumps[i].path, ec);
}

}  // namespace hc::observe
