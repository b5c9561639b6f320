// Tenants on one daemon do not see each other through the admin socket: a client of root and one
// of nobody (65534) each hold a communicator; hcctl run as nobody lists nobody's client and
// communicator only and cannot read root's flight record, hcctl as root lists both, and nobody
// with the hetero-comm-admin group among its supplementary groups lists both. Needs root (the
// second client and hcctl run as another uid; the admin group is created when the system lacks
// it, and removed afterwards); skips without it.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"
#include "tests/integration/hcctl_run.h"
#include "tests/integration/raw_client.h"

namespace hc::integ {
namespace {

using nlohmann::json;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;
constexpr const char* kAdminGroup = "hetero-comm-admin";

std::string hex(const uint8_t* key) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    out += digits[key[i] >> 4];
    out += digits[key[i] & 15];
  }
  return out;
}

// The gid of group hetero-comm-admin, created (and removed at the end) when absent.
class AdminGroup {
 public:
  AdminGroup() {
    if (const group* g = ::getgrnam(kAdminGroup)) {
      gid_ = g->gr_gid;
      return;
    }
    if (std::system("groupadd --system hetero-comm-admin >/dev/null 2>&1") != 0) return;
    created_ = true;
    if (const group* g = ::getgrnam(kAdminGroup)) gid_ = g->gr_gid;
  }
  ~AdminGroup() {
    if (created_ && std::system("groupdel hetero-comm-admin >/dev/null 2>&1") != 0) {
      ADD_FAILURE() << "could not remove the group " << kAdminGroup << " this test created";
    }
  }
  std::optional<gid_t> gid() const { return gid_; }

 private:
  std::optional<gid_t> gid_;
  bool created_ = false;
};

// Runs argv as uid/gid nobody with `groups` as its supplementary groups (fork, setgroups,
// setresgid, setresuid, exec); stdout and stderr come back through a pipe. exitCode -1: it did
// not start, or did not end within 20 s.
// The hcctl nobody runs: a copy in a folder nobody can reach (the build tree may sit in a folder
// only root may enter, as a fresh `mktemp -d` checkout does). Set by the test before use.
std::string gHcctlForNobody = HC_HCCTL_PATH;

HcctlRun runAsNobody(const std::vector<std::string>& args, const std::vector<gid_t>& groups) {
  std::vector<std::string> argv = {gHcctlForNobody};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {-1, "pipe"};
  const pid_t pid = ::fork();
  if (pid < 0) return {-1, "fork"};
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    if (::setgroups(groups.size(), groups.data()) != 0 ||
        ::setresgid(kNogroup, kNogroup, kNogroup) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(120);
    }
    ::execv(raw[0], raw.data());
    ::_exit(121);
  }
  ::close(out[1]);
  HcctlRun run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    pollfd p{out[0], POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[4096];
    const ssize_t n = ::read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    run.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  // The pipe ends a moment before the process does: wait for it until the deadline.
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return run;
    }
    ::usleep(1000);
  }
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// A raw client as nobody in a forked child that holds a one-rank communicator with `key` until
// release() (or the test's end).
class NobodysJob {
 public:
  NobodysJob(const std::string& socket, const uint8_t* key) {
    int ready[2], hold[2];
    HC_CHECK(::pipe2(ready, O_CLOEXEC) == 0 && ::pipe2(hold, O_CLOEXEC) == 0);
    pid_ = ::fork();
    HC_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(ready[0]);
      ::close(hold[1]);
      if (::setgroups(0, nullptr) != 0 || ::setresgid(kNogroup, kNogroup, kNogroup) != 0 ||
          ::setresuid(kNobody, kNobody, kNobody) != 0) {
        ::_exit(2);
      }
      auto client = RawClient::connect(socket);
      if (!client.isOk() || !client->handshake(16 << 20, "nobodys-job").isOk()) ::_exit(3);
      auto id = client->submitCommInit(key, 1, 0);
      if (!id.isOk()) ::_exit(4);
      auto done = client->waitCompletion(*id);
      if (!done.isOk() || done->status != 0) ::_exit(5);
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(6);
      char ignored;
      while (::read(hold[0], &ignored, 1) > 0) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    hold_ = hold[1];
    char byte = 0;
    ready_ = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
  }
  ~NobodysJob() {
    if (hold_ >= 0) ::close(hold_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  NobodysJob(const NobodysJob&) = delete;
  NobodysJob& operator=(const NobodysJob&) = delete;
  bool ready() const { return ready_; }

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
  bool ready_ = false;
};

std::set<uint32_t> uidsOf(const HcctlRun& run) {
  std::set<uint32_t> uids;
  json parsed = json::parse(run.output, nullptr, false);
  if (parsed.is_discarded() || !parsed.contains("clients")) return {0xffffffffu};
  for (const json& c : parsed["clients"]) uids.insert(c["uid"].get<uint32_t>());
  return uids;
}

std::set<std::string> keysOf(const HcctlRun& run) {
  std::set<std::string> keys;
  json parsed = json::parse(run.output, nullptr, false);
  if (parsed.is_discarded() || !parsed.contains("communicators")) return {"(unparsable)"};
  for (const json& c : parsed["communicators"]) keys.insert(c["key"].get<std::string>());
  return keys;
}

TEST(ControlTenancyTest, EachUidSeesItsOwnJobsAndAdminsSeeAll) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run a client and hcctl as another uid";
  AdminGroup adminGroup;
  ASSERT_TRUE(adminGroup.gid()) << "no group " << kAdminGroup << " and groupadd failed";
  auto d = startServingDaemon({"--set", "access.allow_uids=65534"});
  ASSERT_NE(d, nullptr);
  const std::string admin = d->dir() + "/run/hetero-commd-admin.sock";
  // Let nobody reach both sockets (the test's own daemon runs as root in a 0700 folder).
  for (const std::string& p : {d->dir(), d->dir() + "/run"}) ::chmod(p.c_str(), 0755);
  ::chmod(d->socketPath().c_str(), 0666);
  ::chmod(admin.c_str(), 0666);
  gHcctlForNobody = d->dir() + "/hcctl";
  std::error_code copied;
  std::filesystem::copy_file(HC_HCCTL_PATH, gHcctlForNobody,
                             std::filesystem::copy_options::overwrite_existing, copied);
  ASSERT_FALSE(copied) << "cannot copy hcctl to " << gHcctlForNobody << ": " << copied.message();
  ::chmod(gHcctlForNobody.c_str(), 0755);

  uint8_t rootKey[16], nobodyKey[16];
  randomKey(rootKey);
  randomKey(nobodyKey);
  auto mine = RawClient::connect(d->socketPath());
  ASSERT_TRUE(mine.isOk());
  ASSERT_TRUE(mine->handshake(16 << 20, "roots-job").isOk()) << d->logTail();
  auto id = mine->submitCommInit(rootKey, 1, 0);
  ASSERT_TRUE(id.isOk());
  auto done = mine->waitCompletion(*id);
  ASSERT_TRUE(done.isOk() && done->status == 0) << d->logTail();
  NobodysJob theirs(d->socketPath(), nobodyKey);
  ASSERT_TRUE(theirs.ready()) << d->logTail();
  const std::set<std::string> both = {hex(rootKey), hex(nobodyKey)};

  // nobody: its own client and communicator; root's record is not there for it.
  HcctlRun clients = runAsNobody({"--socket", admin, "clients", "--json"}, {});
  ASSERT_EQ(clients.exitCode, 0) << clients.output;
  EXPECT_EQ(uidsOf(clients), (std::set<uint32_t>{kNobody})) << clients.output;
  HcctlRun comms = runAsNobody({"--socket", admin, "comms", "--json"}, {});
  ASSERT_EQ(comms.exitCode, 0) << comms.output;
  EXPECT_EQ(keysOf(comms), (std::set<std::string>{hex(nobodyKey)})) << comms.output;
  EXPECT_EQ(comms.output.find(hex(rootKey)), std::string::npos) << comms.output;
  HcctlRun record = runAsNobody({"--socket", admin, "record", hex(rootKey)}, {});
  EXPECT_NE(record.exitCode, 0) << record.output;
  EXPECT_NE(record.output.find("no communicator"), std::string::npos) << record.output;
  HcctlRun own = runAsNobody({"--socket", admin, "record", hex(nobodyKey)}, {});
  EXPECT_EQ(own.exitCode, 0) << own.output;
  // Health stays open to every caller.
  HcctlRun health = runAsNobody({"--socket", admin, "health"}, {});
  EXPECT_EQ(health.exitCode, 0) << health.output;
  // The inventory is the node's, open to every caller; measuring the GPUs again slows every
  // tenant's jobs, so only admins may.
  HcctlRun devices = runAsNobody({"--socket", admin, "devices", "--json"}, {});
  EXPECT_EQ(devices.exitCode, 0) << devices.output;
  HcctlRun measure = runAsNobody({"--socket", admin, "devices", "--measure"}, {});
  EXPECT_NE(measure.exitCode, 0) << measure.output;
  EXPECT_NE(measure.output.find("admins only"), std::string::npos) << measure.output;
  EXPECT_NE(measure.output.find("(gRPC code 7)"), std::string::npos) << measure.output;  // denied

  // root: both.
  HcctlRun rootClients = hcctl({"--socket", admin, "clients", "--json"}, d->dir());
  ASSERT_EQ(rootClients.exitCode, 0) << rootClients.output;
  EXPECT_EQ(uidsOf(rootClients), (std::set<uint32_t>{0, kNobody})) << rootClients.output;
  HcctlRun rootComms = hcctl({"--socket", admin, "comms", "--json"}, d->dir());
  EXPECT_EQ(keysOf(rootComms), both) << rootComms.output;

  // nobody in the admin group: both.
  HcctlRun adminClients = runAsNobody({"--socket", admin, "clients", "--json"}, {*adminGroup.gid()});
  ASSERT_EQ(adminClients.exitCode, 0) << adminClients.output;
  EXPECT_EQ(uidsOf(adminClients), (std::set<uint32_t>{0, kNobody})) << adminClients.output;
  HcctlRun adminComms = runAsNobody({"--socket", admin, "comms", "--json"}, {*adminGroup.gid()});
  EXPECT_EQ(keysOf(adminComms), both) << adminComms.output;
  HcctlRun adminMeasure =
      runAsNobody({"--socket", admin, "devices", "--measure"}, {*adminGroup.gid()});
  EXPECT_EQ(adminMeasure.exitCode, 0) << adminMeasure.output;
  EXPECT_EQ(d->stop(), 0) << d->logTail();
}

}  // namespace
}  // namespace hc::integ
