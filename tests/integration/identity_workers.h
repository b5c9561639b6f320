// What the tests of communicator identity share (comm_identity_test.cc and
// comm_identity_join_test.cc): a two-daemon cluster with a first unique id made at its daemon 0,
// ids derived from it whose keys share bytes 0 and 1 (the 16 bits that once named a communicator
// on the wire), the hc_identity_worker processes of a test (identity_worker.h) and the checks of
// their output and of the daemons' logs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/multi_daemon.h"

namespace hc::integ {

constexpr std::chrono::seconds kJobTimeout(60);
constexpr std::chrono::seconds kReadyTimeout(30);

// The unique id (client/src/comm_api.cc, UniqueIdLayout): magic and version, 4 bytes each, then
// the 16-byte communicator key, then the root daemon's address.
constexpr size_t kKeyOffset = 8;
constexpr size_t kKeyBytes = 16;

// Another communicator's id whose key shares bytes 0 and 1 (the old 16-bit wire name) with
// hex's: key bytes 2..15 flipped, the root the same.
std::string collidingId(const std::string& hex);
// Id n of a family of distinct communicators whose keys all share bytes 0 and 1 with hex's (id 0
// is hex): key bytes 2..9 hold n, bytes 10..15 are flipped.
std::string familyId(const std::string& hex, uint64_t n);
// Ids 0..n-1 of hex's family (familyId).
std::vector<std::string> familyIds(const std::string& hex, int n);
// Expects the ids to collide on the old wire name, nothing else telling them apart but the rest
// of the key.
void expectCollide(const std::string& a, const std::string& b);
// Writes one id per line for the workers' --ids; returns path, or "" when it could not be written.
std::string writeIds(const std::string& path, const std::vector<std::string>& ids);

// Whether text holds line as a whole line.
bool hasLine(const std::string& text, const std::string& line);
// How many times what occurs in text.
int countOf(const std::string& text, const std::string& what);
// a followed by b.
std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b);
// Creates (or truncates) the file at path: a go file the workers wait for.
void touch(const std::string& path);

// The cluster of a test and its first id, made at daemon 0 (so daemon 0 is the root).
struct StartedCluster {
  std::unique_ptr<DaemonCluster> cluster;
  std::string id;         // "" when the cluster or the id could not be made
  std::string colliding;  // startCollidingJobs: a second job's id, its key colliding with id's
  std::string error;      // why id is ""
};

// Starts a cluster with options and makes an id at its daemon 0. A test ASSERTs that id is not
// empty (then the cluster is there too), with error.
StartedCluster startCluster(ClusterOptions options = {});
// startCluster for two jobs whose keys collide: colliding is collidingId(id), expected to
// collide with it (expectCollide).
StartedCluster startCollidingJobs();

// The hc_identity_worker processes of one test, each against one daemon of the cluster. Declared
// after the cluster, so that they are killed (if still running) before the daemons.
class Workers {
 public:
  // Borrowed: the cluster outlives its workers.
  explicit Workers(DaemonCluster& cluster) : cluster_(cluster) {}

  // Starts a worker against daemon d (under the daemon's command prefix, as ClusterJob runs
  // ranks); its output goes to <cluster dir>/<name>.log. False with *error on failure.
  [[nodiscard]] bool start(const std::string& name, int d, const std::vector<std::string>& args,
                           std::string* error);
  // Starts a worker per rank r < nranks, "p<r>" against daemon r % daemons, with args, then
  // --rank r, then own[r] where own has it. "" when all started, else why the first did not.
  [[nodiscard]] std::string startRanks(int nranks, const std::vector<std::string>& args,
                                       const std::vector<std::vector<std::string>>& own = {});

  // The worker called name (a test failure, and the first worker, when there is none).
  ChildProcess& operator[](const std::string& name);

  // Whether every worker printed text within timeout.
  bool allPrinted(const std::string& text, std::chrono::milliseconds timeout);

  // Waits for every worker, then expects each to have exited 0 having printed "#wrong 0" and no
  // ERROR, WRONG or HUNG line; a failure carries every worker's output and the daemons' logs.
  void expectAllSucceed(std::chrono::milliseconds timeout);

  // "" when the worker exited 0 with "#wrong 0" and no ERROR, WRONG or HUNG line.
  std::string problemsOf(const std::string& name);

  // Every worker's output (the middle of a long one cut out), under its name, daemon and end.
  std::string report();

 private:
  struct Worker {
    std::string name;
    int daemon;
    std::unique_ptr<ChildProcess> proc;
  };

  std::string problemsOf(Worker& w);

  DaemonCluster& cluster_;
  std::vector<Worker> workers_;
};

// Every daemon stops cleanly (exit 0) once the workers are gone.
void expectCleanStop(DaemonCluster& cluster);
// Each daemon formed at least n communicators across both: the ranks really crossed daemons.
void expectFormedAcrossBoth(DaemonCluster& cluster, int n);

}  // namespace hc::integ
