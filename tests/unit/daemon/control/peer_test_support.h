// Shared by the Peer bootstrap tests: a private folder with token files, a root PeerServer on
// 127.0.0.1:0, joins made of readable parts, and joiner threads.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/control/peer_client.h"
#include "daemon/control/peer_server.h"
#include "tests/support/temp_dir.h"

namespace hc::control::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr char kToken[] = "correct-horse-battery-staple-0123456789";

// A private folder for the token files (tests/support/temp_dir.h), removed with everything in it.
class TempDir : public hc::test::TempDir {
 public:
  TempDir() : hc::test::TempDir("hc-control") {}
};

// Writes `content` to `path` with exactly `mode` (whatever the umask).
inline void writeFile(const std::string& path, const std::string& content, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  HC_CHECK(fd >= 0);
  HC_CHECK(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  HC_CHECK(::fchmod(fd, mode) == 0);
  ::close(fd);
}

inline peer::CommKey keyOf(uint8_t seed) {
  peer::CommKey key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(seed * 31 + i);
  return key;
}

// A join from node `node` of communicator `key`; its transport address names both, so a table
// that mixed communicators up would show it.
inline peer::JoinRequest makeJoin(const peer::CommKey& key, uint32_t nranks,
                                  std::vector<uint32_t> ranks, const std::string& node) {
  peer::JoinRequest join;
  join.key = key;
  join.nranks = nranks;
  join.ranks = std::move(ranks);
  join.node = {"host-" + node, "boot-" + node, "instance-" + node};
  join.transportAddress = "ucx-worker-of-" + node + "-for-" + peer::commKeyHex(key);
  return join;
}

// A root daemon's Peer listener with a 0600 token file, and joiners that share the token.
class PeerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenPath_ = dir_.file("token");
    writeFile(tokenPath_, std::string(kToken) + "\n", 0600);
    PeerServerOptions options;
    options.tokenPath = tokenPath_;
    options.defaultJoinTimeout = 20s;
    configure(options);
    Result<std::unique_ptr<PeerServer>> server = PeerServer::start(options);
    ASSERT_TRUE(server.isOk()) << server.status().toString();
    server_ = std::move(server).value();
    root_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  // A fixture's changes to the root's options, before it starts.
  virtual void configure(PeerServerOptions&) {}

  std::unique_ptr<PeerClient> newClient(const std::string& tokenPath) {
    PeerClientOptions options;
    options.tokenPath = tokenPath;
    Result<std::unique_ptr<PeerClient>> client = PeerClient::create(options);
    HC_CHECK(client.isOk());
    return std::move(client).value();
  }
  std::unique_ptr<PeerClient> newClient() { return newClient(tokenPath_); }

  // Waits (without sleeping blindly) until `count` ranks of `key` are pending at the root.
  void awaitJoined(const peer::CommKey& key, size_t count) {
    ASSERT_TRUE(server_->registry().waitForJoinedCount(key, count, 10s))
        << "the root never had " << count << " ranks of " << peer::commKeyHex(key) << " pending";
  }

  TempDir dir_;
  std::string tokenPath_;
  std::unique_ptr<PeerServer> server_;
  std::string root_;
};

// This process's resident memory from /proc/self/status (VmRSS now, VmHWM the peak since
// clearPeakRss()), in bytes.
inline size_t rssField(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(field + ":")) return std::stoull(line.substr(field.size() + 1)) << 10;
  }
  return 0;
}
inline bool clearPeakRss() {
  std::ofstream clearRefs("/proc/self/clear_refs");
  clearRefs << "5";  // resets VmHWM to VmRSS
  clearRefs.flush();
  return clearRefs.good();
}

// Runs each join on its own thread with its own PeerClient, as separate daemons would.
class Joiners {
 public:
  Joiners(std::string root, std::string tokenPath)
      : root_(std::move(root)), tokenPath_(std::move(tokenPath)) {}
  ~Joiners() { joinAll(); }

  // Starts one joiner; returns its index for result() and finishedAt().
  size_t start(peer::JoinRequest join, Clock::time_point deadline) {
    PeerClientOptions options;
    options.tokenPath = tokenPath_;
    Result<std::unique_ptr<PeerClient>> client = PeerClient::create(options);
    HC_CHECK(client.isOk());
    slots_.push_back(std::make_unique<Slot>());
    Slot* slot = slots_.back().get();
    threads_.emplace_back(
        [this, slot, join = std::move(join), deadline, client = std::move(client).value()] {
          slot->result = client->join(root_, join, deadline);
          slot->finishedAt = Clock::now();
        });
    return slots_.size() - 1;
  }

  void joinAll() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Valid after joinAll().
  const Result<peer::RankTable>& result(size_t index) const { return slots_[index]->result; }
  Clock::time_point finishedAt(size_t index) const { return slots_[index]->finishedAt; }
  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    Result<peer::RankTable> result = internalError("the joiner never finished");
    Clock::time_point finishedAt;
  };

  const std::string root_;
  const std::string tokenPath_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> threads_;
};

}  // namespace hc::control::testing
