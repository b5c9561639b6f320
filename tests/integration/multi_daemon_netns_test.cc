// Two daemons in two network namespaces joined only by a veth pair (10.99.0.1/24 and
// 10.99.0.2/24): the closest this machine gets to two nodes. Each daemon sees only its end of the
// pair and its own loopback, so the Peer bootstrap (gRPC) and the UCX data path (tcp,self) must go
// over the veth link. Rank processes run in their daemon's namespace as well; their Unix sockets
// live in the filesystem, which the namespaces share. No traffic leaves the two namespaces.
//
// Needs root and iproute2; skipped (with the reason) otherwise, or where namespaces cannot be
// made (an unprivileged container).
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/multi_daemon.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using std::chrono::seconds;

std::string findIp() {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    std::string path = std::string(dir) + "/ip";
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// The two namespaces and the veth pair, removed (with everything in them) on destruction. Names
// carry the test's pid, so parallel runs and leftovers of a crashed run do not collide.
class VethPair {
 public:
  VethPair(std::string ip, std::string logDir) : ip_(std::move(ip)), logDir_(std::move(logDir)) {
    const std::string tag = std::to_string(::getpid());
    ns_ = {"hc-integ-" + tag + "-a", "hc-integ-" + tag + "-b"};
    links_ = {"hcv" + tag + "a", "hcv" + tag + "b"};  // at most 15 characters (IFNAMSIZ)
  }
  ~VethPair() {
    std::string out;
    // Deleting a namespace deletes its end of the pair and with it the other end; a pair that
    // never moved into the namespaces is deleted by name.
    for (const auto& ns : created_) (void)run({"netns", "delete", ns}, &out);
    if (linkInRoot_) (void)run({"link", "delete", links_[0]}, &out);
  }
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;

  // Creates everything; "" on success, else what failed (with the command's output).
  std::string setUp() {
    removeLeftovers();
    for (const auto& ns : ns_) {
      if (std::string e = step({"netns", "add", ns}); !e.empty()) return e;
      created_.push_back(ns);
    }
    if (std::string e = step({"link", "add", links_[0], "type", "veth", "peer", "name", links_[1]});
        !e.empty()) {
      return e;
    }
    linkInRoot_ = true;
    for (int i = 0; i < 2; ++i) {
      if (std::string e = step({"link", "set", links_[i], "netns", ns_[i]}); !e.empty()) return e;
    }
    linkInRoot_ = false;
    for (int i = 0; i < 2; ++i) {
      const std::vector<std::vector<std::string>> steps = {
          {"-n", ns_[i], "addr", "add", address(i) + "/24", "dev", links_[i]},
          {"-n", ns_[i], "link", "set", links_[i], "up"},
          {"-n", ns_[i], "link", "set", "lo", "up"}};
      for (const auto& args : steps) {
        if (std::string e = step(args); !e.empty()) return e;
      }
    }
    return "";
  }

  const std::string& ns(int i) const { return ns_[static_cast<size_t>(i)]; }
  static std::string address(int i) { return i == 0 ? "10.99.0.1" : "10.99.0.2"; }
  std::vector<std::string> exec(int i) const { return {ip_, "netns", "exec", ns(i)}; }

 private:
  // Namespaces of earlier runs whose test process died before it could remove them (a ctest
  // timeout kills it with SIGKILL): hc-integ-<pid>-a/b with no process <pid> any more.
  void removeLeftovers() {
    std::string list;
    if (run({"netns", "list"}, &list) != 0) return;
    std::istringstream lines(list);
    for (std::string line; std::getline(lines, line);) {
      const std::string name = line.substr(0, line.find(' '));
      const std::string prefix = "hc-integ-";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string pid = name.substr(prefix.size(), name.rfind('-') - prefix.size());
      if (pid.empty() || ::access(("/proc/" + pid).c_str(), F_OK) == 0) continue;
      std::string out;
      (void)run({"netns", "delete", name}, &out);
    }
  }
  int run(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {ip_};
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand(argv, logDir_ + "/ip-" + std::to_string(serial_++) + ".log", seconds(10),
                      out);
  }
  std::string step(const std::vector<std::string>& args) {
    std::string out;
    if (run(args, &out) == 0) return "";
    std::string cmd = ip_;
    for (const auto& a : args) cmd += " " + a;
    return cmd + ": " + out;
  }

  std::string ip_;
  std::string logDir_;
  std::vector<std::string> ns_;
  std::vector<std::string> links_;
  std::vector<std::string> created_;
  bool linkInRoot_ = false;
  int serial_ = 0;
};

TEST(MultiDaemonNetnsTest, MatrixAcrossTwoNamespacesJoinedByAVethPair) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
  const std::string ip = findIp();
  if (ip.empty()) GTEST_SKIP() << "iproute2's ip is not installed";
  // For the ip commands' output.
  const test::TempDir dir("hc-netns");
  // Declared first, so destroyed last: every daemon and rank has left the namespaces by then.
  VethPair net(ip, dir.path());
  if (std::string why = net.setUp(); !why.empty()) {
    GTEST_SKIP() << "cannot make network namespaces here: " << why;
  }
  std::string error;
  ClusterOptions options;
  options.daemons = 2;
  options.listenAddress = [](int d) { return VethPair::address(d) + ":0"; };
  options.commandPrefix = [&net](int d) { return net.exec(d); };
  auto cluster = DaemonCluster::start(options, &error);
  ASSERT_NE(cluster, nullptr) << error;
  // The id names daemon 0 at 10.99.0.1, which namespace b reaches only over the veth pair.
  auto job = ClusterJob::start(*cluster, "netns", {0, 0, 1, 1},
                               {"--mode", "matrix", "--seed", "3", "--watchdog", "30"}, &error);
  ASSERT_NE(job, nullptr) << error;
  expectClusterJobSucceeds(*job, *cluster, seconds(150));
  for (int d = 0; d < 2; ++d) {
    EXPECT_NE(cluster->daemon(d).log().find("formed across 2 daemons"), std::string::npos)
        << cluster->logTails();
  }
  EXPECT_NE(cluster->daemon(0).log().find("advertised as 10.99.0.1:"), std::string::npos)
      << cluster->logTails();
  job.reset();
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(cluster->daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster->logTails();
  }
}

}  // namespace
}  // namespace hc::integ
