// The ids, the text checks and the workers of the communicator identity tests (identity_workers.h).
#include "tests/integration/identity_workers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "tests/support/hex.h"

namespace hc::integ {
namespace {

// The id behind hex (as uniqueIdHex returns it), whose key the functions below change.
hc_unique_id_t idOf(const std::string& hex) {
  hc_unique_id_t id{};
  EXPECT_TRUE(test::parseHexId(hex, &id)) << "not a unique id: " << hex;
  return id;
}

// Byte k of the id's communicator key.
uint8_t& keyByte(hc_unique_id_t& id, size_t k) {
  return reinterpret_cast<uint8_t&>(id.internal[kKeyOffset + k]);
}

}  // namespace

using std::chrono::milliseconds;

std::string collidingId(const std::string& hex) {
  hc_unique_id_t id = idOf(hex);
  for (size_t k = 2; k < kKeyBytes; ++k) keyByte(id, k) ^= 0xff;
  return test::toHex(id);
}

std::string familyId(const std::string& hex, uint64_t n) {
  if (n == 0) return hex;
  hc_unique_id_t id = idOf(hex);
  for (size_t k = 2; k < kKeyBytes; ++k) {
    keyByte(id, k) ^= k < 10 ? static_cast<uint8_t>(n >> (8 * (k - 2))) : uint8_t{0xff};
  }
  return test::toHex(id);
}

std::vector<std::string> familyIds(const std::string& hex, int n) {
  std::vector<std::string> ids;
  for (int j = 0; j < n; ++j) ids.push_back(familyId(hex, static_cast<uint64_t>(j)));
  return ids;
}

void expectCollide(const std::string& a, const std::string& b) {
  EXPECT_NE(a, b) << "the two ids name the same communicator";
  hc_unique_id_t idA = idOf(a);
  hc_unique_id_t idB = idOf(b);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(int{keyByte(idA, k)}, int{keyByte(idB, k)}) << "key byte " << k;
  }
}

std::string writeIds(const std::string& path, const std::vector<std::string>& ids) {
  std::ofstream out(path);
  for (const std::string& id : ids) out << id << "\n";
  return out.good() ? path : "";
}

bool hasLine(const std::string& text, const std::string& line) {
  return text.rfind(line + "\n", 0) == 0 || text.find("\n" + line + "\n") != std::string::npos;
}

int countOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void touch(const std::string& path) { std::ofstream(path).put('\n'); }

StartedCluster startCluster(ClusterOptions options) {
  StartedCluster s;
  s.cluster = DaemonCluster::start(std::move(options), &s.error);
  if (s.cluster != nullptr) s.id = s.cluster->newId(0, &s.error);
  return s;
}

StartedCluster startCollidingJobs() {
  StartedCluster s = startCluster();
  if (s.id.empty()) return s;
  s.colliding = collidingId(s.id);
  expectCollide(s.id, s.colliding);
  return s;
}

bool Workers::start(const std::string& name, int d, const std::vector<std::string>& args,
                    std::string* error) {
  std::vector<std::string> argv = cluster_.commandPrefix(d);
  argv.push_back(HC_IDENTITY_WORKER_PATH);
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = ChildProcess::spawn(argv, cluster_.daemon(d).clientEnv(),
                               cluster_.dir() + "/" + name + ".log", error);
  if (!p) return false;
  workers_.push_back(Worker{name, d, std::move(p)});
  return true;
}

std::string Workers::startRanks(int nranks, const std::vector<std::string>& args,
                                const std::vector<std::vector<std::string>>& own) {
  for (int r = 0; r < nranks; ++r) {
    std::vector<std::string> rankArgs = concat(args, {"--rank", std::to_string(r)});
    if (static_cast<size_t>(r) < own.size()) rankArgs = concat(rankArgs, own[r]);
    const std::string name = "p" + std::to_string(r);
    std::string error;
    if (!start(name, r % cluster_.size(), rankArgs, &error)) return name + ": " + error;
  }
  return "";
}

ChildProcess& Workers::operator[](const std::string& name) {
  for (Worker& w : workers_) {
    if (w.name == name) return *w.proc;
  }
  ADD_FAILURE() << "no worker " << name;
  return *workers_.front().proc;
}

bool Workers::allPrinted(const std::string& text, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (Worker& w : workers_) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!w.proc->waitForOutput(text, std::max(left, milliseconds(0)))) return false;
  }
  return true;
}

void Workers::expectAllSucceed(milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string problems;
  for (Worker& w : workers_) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!w.proc->waitExit(std::max(left, milliseconds(0)))) {
      problems += w.name + ": still running after " + std::to_string(timeout.count()) + " ms\n";
      continue;
    }
    problems += problemsOf(w);
  }
  EXPECT_EQ(problems, "") << report() << "\n" << cluster_.logTails();
}

std::string Workers::problemsOf(const std::string& name) {
  for (Worker& w : workers_) {
    if (w.name == name) return problemsOf(w);
  }
  return "no worker " + name + "\n";
}

std::string Workers::report() {
  std::string out;
  for (Worker& w : workers_) {
    w.proc->poll();
    std::string text = w.proc->output();
    if (text.size() > 6000)
      text = text.substr(0, 3000) + "\n...\n" + text.substr(text.size() - 3000);
    out += "--- " + w.name + " on daemon " + std::to_string(w.daemon) + " (pid " +
           std::to_string(w.proc->pid()) + ", " + w.proc->describeEnd() + "):\n" + text;
  }
  return out;
}

std::string Workers::problemsOf(Worker& w) {
  const std::string out = w.proc->output();
  std::string problems;
  if (w.proc->exitCode() != 0) problems += w.name + ": " + w.proc->describeEnd() + "\n";
  if (!hasLine(out, "#wrong 0")) problems += w.name + ": no '#wrong 0'\n";
  for (const char* bad : {"ERROR ", "WRONG ", "HUNG "}) {
    if (out.find(bad) != std::string::npos) problems += w.name + ": printed " + bad + "lines\n";
  }
  return problems;
}

void expectCleanStop(DaemonCluster& cluster) {
  for (int d = 0; d < cluster.size(); ++d) {
    EXPECT_EQ(cluster.daemon(d).stop(), 0) << "daemon " << d << "\n" << cluster.logTails();
  }
}

void expectFormedAcrossBoth(DaemonCluster& cluster, int n) {
  for (int d = 0; d < cluster.size(); ++d) {
    EXPECT_GE(countOf(cluster.daemon(d).log(), "formed across 2 daemons"), n)
        << "daemon " << d << "\n"
        << cluster.logTails();
  }
}

}  // namespace hc::integ
