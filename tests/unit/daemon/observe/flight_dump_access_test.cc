// Who may read a flight-record dump (daemon/observe/flight_json.h, flight_dumper.h): the daemon
// and the admin group, never the daemon's own group of tenants: mode 0640 whatever the umask, the
// reader group when there is one, and owner-only when the daemon cannot give the file to it.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "daemon/observe/flight_dumper.h"
#include "daemon/observe/flight_json.h"

namespace hc::observe {
namespace {

namespace fs = std::filesystem;

constexpr gid_t kNogroup = 65534;

FlightSnapshot snapshotOf(const std::string& key) {
  FlightRecorder recorder(CommIdentity{.id = 1, .keyHex = key, .nranks = 2, .localRanks = {0}}, 4);
  return recorder.snapshot();
}

std::string freshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/flight-dump-access-test/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct stat statOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(FlightDumpAccessTest, ADumpIs0640WhateverTheUmask) {
  const std::string dir = freshDir("umask");
  const mode_t previous = ::umask(0);
  auto wide = dumpFlightRecord(dir, snapshotOf("aa11"), "request", "");
  ::umask(077);
  auto narrow = dumpFlightRecord(dir, snapshotOf("aa12"), "request", "");
  ::umask(previous);
  ASSERT_TRUE(wide.isOk()) << wide.status().toString();
  ASSERT_TRUE(narrow.isOk()) << narrow.status().toString();
  EXPECT_EQ(statOf(*wide).st_mode & 07777, 0640u) << "umask 0 must not make it world-readable";
  EXPECT_EQ(statOf(*narrow).st_mode & 07777, 0640u) << "umask 077 must not hide it from the group";
}

TEST(FlightDumpAccessTest, ADumpBelongsToTheReaderGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to a group the test is not in needs root";
  const std::string dir = freshDir("group");
  auto path = dumpFlightRecord(dir, snapshotOf("bb11"), "request", "", kNogroup);
  ASSERT_TRUE(path.isOk()) << path.status().toString();
  const struct stat st = statOf(*path);
  EXPECT_EQ(st.st_gid, kNogroup);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

// A daemon that may not give the file to the reader group keeps it to itself rather than leave
// it readable by its own group. Run as nobody in a forked child (root drops to it).
TEST(FlightDumpAccessTest, AGroupTheDaemonCannotUseLeavesTheDumpOwnerOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to write as nobody";
  const std::string dir = freshDir("foreign");
  ASSERT_EQ(::chown(dir.c_str(), 65534, kNogroup), 0);
  for (fs::path p = dir; p != p.parent_path() && p.string().size() > 1; p = p.parent_path()) {
    ::chmod(p.c_str(), statOf(p).st_mode | 0005);  // let nobody reach it
  }
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNogroup, kNogroup, kNogroup) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(2);
    }
    auto path = dumpFlightRecord(dir, snapshotOf("cc11"), "request", "", 0 /* root's group */);
    if (!path.isOk()) ::_exit(3);
    struct stat st {};
    if (::stat(path->c_str(), &st) != 0) ::_exit(4);
    ::_exit((st.st_mode & 07777) == 0600 && st.st_gid == kNogroup ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2 setup, 3 no dump, 4 no stat, 5 wrong mode or group";
}

TEST(FlightDumpAccessTest, TheDumperLooksUpItsReaderGroupByName) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to a group the test is not in needs root";
  const group* nogroup = ::getgrgid(kNogroup);
  if (nogroup == nullptr) GTEST_SKIP() << "no group 65534 on this system";
  const std::string dir = freshDir("dumper");
  std::string written;
  {
    FlightDumper dumper(FlightDumper::Options{.stateDir = dir, .readerGroup = nogroup->gr_name},
                        [&](const Result<std::string>& path, const std::string&) {
                          if (path.isOk()) written = path.value();
                        });
    ASSERT_TRUE(dumper.submit(snapshotOf("dd11"), "request", "", "test"));
  }  // the destructor writes what is queued
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(statOf(written).st_gid, kNogroup);
  EXPECT_EQ(statOf(written).st_mode & 07777, 0640u);
}

}  // namespace
}  // namespace hc::observe
