// Prometheus' own checker on the daemon's rendered metrics: `promtool check metrics` parses the
// text and lints the names (units, _total on counters, HELP present). Runs when promtool is on
// PATH (Debian package `prometheus`), and skips with the reason otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "daemon/metrics/daemon_metrics.h"

namespace hc::metrics {
namespace {

std::optional<std::string> findOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

struct CommandResult {
  int exitCode = -1;
  std::string output;
};

// Runs `promtool check metrics < file`, capturing stdout and stderr.
CommandResult checkMetrics(const std::string& promtool, const std::string& file) {
  CommandResult result;
  const std::string command = "'" + promtool + "' check metrics < '" + file + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[1024];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
  return result;
}

// Every family populated, with label values that need escaping.
std::string renderedSample() {
  DaemonMetrics metrics(BuildInfo{"0.1.0", false, true, "1.13.1"});
  metrics.collectiveFinished("allreduce", "float32", "ok", 0.0003, 1 << 20);
  metrics.collectiveFinished("allreduce", "bfloat16", "timeout", 30, 1 << 20);
  metrics.collectiveFinished("alltoall", "weird \"dtype\"\\\n", "ok", 12, 64ull << 20);
  metrics.addBytes("sent", "ucx", 123456789);
  metrics.addBytes("received", "shm", 42);
  metrics.setPeerUp("[fd00::2]:9411", true);
  metrics.setClients(2);
  metrics.stagingFallback("module_load_failed");
  return metrics.render();
}

TEST(PromtoolTest, CheckMetricsAcceptsTheRenderedText) {
  const auto promtool = findOnPath("promtool");
  if (!promtool) GTEST_SKIP() << "promtool is not on PATH (Debian package: prometheus)";

  char file[] = "/tmp/hc_metrics_promtoolXXXXXX";
  const int fd = ::mkstemp(file);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string text = renderedSample();
  std::ofstream(file) << text;
  const CommandResult result = checkMetrics(*promtool, file);
  ::unlink(file);
  EXPECT_EQ(result.exitCode, 0) << result.output << "\n--- input ---\n" << text;
  EXPECT_EQ(result.output, "") << "promtool lint findings";
}

}  // namespace
}  // namespace hc::metrics
