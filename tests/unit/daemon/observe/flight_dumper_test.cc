// FlightDumper and the dump's file handling (daemon/observe/flight_dumper.h, flight_json.h): a
// flood of incidents writes a bounded number of dumps, the folder keeps the newest, and nothing
// planted in the folder is written through or replaced.
#include "daemon/observe/flight_dumper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/observe/flight_json.h"

namespace hc::observe {
namespace {

namespace fs = std::filesystem;

FlightSnapshot snapshotOf(const std::string& key) {
  FlightRecorder recorder(CommIdentity{.id = 1, .keyHex = key, .nranks = 2, .localRanks = {0}}, 4);
  return recorder.snapshot();
}

std::string freshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/flight-dumper-test/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

size_t dumpsIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    n += name.starts_with("flight-") && name.ends_with(".json") ? 1 : 0;
  }
  return n;
}

TEST(FlightDumperTest, AFloodOfIncidentsWritesTheBurstAndCountsTheRest) {
  const std::string dir = freshDir("flood");
  std::atomic<int> written{0};
  {
    FlightDumper dumper(FlightDumper::Options{.stateDir = dir, .burst = 5, .perMinute = 1,
                                              .maxQueued = 100},
                        [&](const Result<std::string>& path, const std::string&) {
                          if (path.isOk()) ++written;
                        });
    int accepted = 0;
    for (int i = 0; i < 200; ++i) accepted += dumper.submit(snapshotOf("00aa"), "failed", "", "c");
    EXPECT_EQ(accepted, 5);
    EXPECT_EQ(dumper.skipped(), 195u);
  }  // the destructor writes what was queued
  EXPECT_EQ(written.load(), 5);
  EXPECT_EQ(dumpsIn(dir), 5u) << "dumps of one millisecond keep distinct names";
}

TEST(FlightDumperTest, TheFolderKeepsTheNewestDumps) {
  const std::string dir = freshDir("rotate");
  {
    FlightDumper dumper(FlightDumper::Options{.stateDir = dir, .burst = 30, .keepFiles = 4,
                                              .maxQueued = 100},
                        nullptr);
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(dumper.submit(snapshotOf("00bb"), "late", "", "c"));
  }
  EXPECT_EQ(dumpsIn(dir), 4u);
}

TEST(FlightJsonTest, APlantedLinkAtTheDumpsNameIsNeitherFollowedNorReplaced) {
  const std::string dir = freshDir("planted");
  const std::string target = dir + "/victim";
  std::ofstream(target) << "untouched";
  // Every name a dump of this millisecond or the next could take, as links to the victim.
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  for (int64_t t = ms; t < ms + 2000; ++t) {
    const std::string stem = dir + "/flight-00cc-failed-" + std::to_string(t);
    ASSERT_EQ(::symlink(target.c_str(), (stem + ".json").c_str()), 0);
  }
  Result<std::string> path = dumpFlightRecord(dir, snapshotOf("00cc"), "failed", "");
  ASSERT_TRUE(path.isOk()) << path.status().toString();
  EXPECT_TRUE(path->ends_with("-1.json")) << *path;
  EXPECT_FALSE(fs::is_symlink(*path));
  std::ifstream victim(target);
  std::string text;
  std::getline(victim, text);
  EXPECT_EQ(text, "untouched");
}

}  // namespace
}  // namespace hc::observe
