// probeHipDevices() on machines without an AMD GPU: every way HIP can be unavailable gives one
// clear "HIP unavailable: <why>" instead of a crash or a hang. Each probe runs in a forked child
// with a deadline, so a runtime that crashes or blocks fails the test instead of killing or
// stalling the whole binary. On a machine where the probe finds a GPU these tests skip.
#include "daemon/device/hip/hip_probe.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace hc::device {
namespace {

constexpr const char* kMissingLibrary = "libhc-test-no-such-amdhip64.so.0";
constexpr const char* kDebianHipLibrary = "libamdhip64.so.5";
constexpr auto kDeadline = std::chrono::seconds(60);

struct ProbeOutcome {
  bool finished = false;  // false: the child crashed or missed the deadline
  std::string what;       // why, when !finished
  bool available = false;
  int code = 0;         // hc::Code of the failure
  std::string message;  // the failure's message, or the first device's model
};

// Runs probeHipDevices(options) in a child process. The child writes "<available> <code>
// <message>" to a pipe, where an available probe's message is "<model> (<PCI bus id>)" of each
// device with its reductions' path, joined by "; "; the parent waits at most kDeadline.
ProbeOutcome probeInChild(const HipProbeOptions& options) {
  int fds[2];
  if (::pipe(fds) != 0) return {false, "pipe failed"};
  pid_t child = ::fork();
  if (child < 0) return {false, "fork failed"};
  if (child == 0) {
    ::close(fds[0]);
    Result<HipProbeResult> probed = probeHipDevices(options);
    std::string line;
    if (probed.isOk()) {
      line = "1 0 ";
      for (const auto& device : probed.value().devices) {
        if (line.size() > 4) line += "; ";
        line += device->info().model + " (" + device->info().pciBusId + ") " +
                (device->capabilities().reduceKernels ? "kernels" : "staged");
      }
    } else {
      line = "0 " + std::to_string(static_cast<int>(probed.status().code())) + " " +
             probed.status().message();
    }
    ssize_t ignored = ::write(fds[1], line.data(), line.size());
    (void)ignored;
    ::_exit(0);  // skip the runtime's exit handlers: the parent judges only what was written
  }
  ::close(fds[1]);
  ProbeOutcome outcome;
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      ::close(fds[0]);
      return {false, "the probe did not finish within 60 s"};
    }
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[512];
    ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // the child closed the pipe
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return {false, "the probe's process died (status " + std::to_string(status) + ")"};
  }
  if (text.size() < 4) return {false, "the probe's process wrote nothing"};
  outcome.finished = true;
  outcome.available = text[0] == '1';
  size_t space = text.find(' ', 2);
  outcome.code = std::stoi(text.substr(2, space - 2));
  outcome.message = space == std::string::npos ? "" : text.substr(space + 1);
  return outcome;
}

bool libraryPresent(const char* name) {
  void* library = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) return false;
  ::dlclose(library);
  return true;
}

TEST(HipProbeTest, MissingLibraryIsUnavailableAndNamesIt) {
  HipProbeOptions options;
  options.libraryNames = {kMissingLibrary};
  ProbeOutcome outcome = probeInChild(options);
  ASSERT_TRUE(outcome.finished) << outcome.what;
  ASSERT_FALSE(outcome.available);
  EXPECT_EQ(outcome.code, static_cast<int>(Code::Unavailable));
  EXPECT_EQ(outcome.message.rfind("HIP unavailable: ", 0), 0u) << outcome.message;
  EXPECT_NE(outcome.message.find(kMissingLibrary), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find("cannot open shared object file"), std::string::npos)
      << outcome.message;
}

TEST(HipProbeTest, EmptyLibraryListIsUnavailable) {
  HipProbeOptions options;
  options.libraryNames.clear();
  Result<HipProbeResult> probed = probeHipDevices(options);  // opens nothing: safe in-process
  ASSERT_FALSE(probed.isOk());
  EXPECT_EQ(probed.status().code(), Code::Unavailable);
  EXPECT_EQ(probed.status().message().rfind("HIP unavailable: ", 0), 0u);
}

// A library that opens but is not a HIP runtime: rejected for its missing entry points, with
// their names, and the probe goes on to the next name.
TEST(HipProbeTest, LibraryWithoutHipSymbolsIsRejectedByName) {
  HipProbeOptions options;
  options.libraryNames = {"libm.so.6", kMissingLibrary};
  ProbeOutcome outcome = probeInChild(options);
  ASSERT_TRUE(outcome.finished) << outcome.what;
  ASSERT_FALSE(outcome.available);
  EXPECT_NE(outcome.message.find("libm.so.6 lacks hipInit"), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find(kMissingLibrary), std::string::npos) << outcome.message;
}

// The fake runtime the integration tests give a daemon (fake_libamdhip64.cc), loaded by path:
// the probe opens each of its GPUs, with the places and names the daemon's device list shows,
// and loads the embedded kernels into each.
TEST(HipProbeTest, FindsEveryGpuOfTheFakeRuntimeAndLoadsTheKernels) {
  HipProbeOptions options;
  options.libraryNames = {kMissingLibrary, HC_FAKE_HIP_DAEMON_PATH};
  ProbeOutcome outcome = probeInChild(options);
  ASSERT_TRUE(outcome.finished) << outcome.what;
  ASSERT_TRUE(outcome.available) << outcome.message;
  EXPECT_EQ(outcome.message,
            "Fake HIP GPU 0 (0000:c1:00.0) kernels; Fake HIP GPU 1 (0000:c2:00.0) kernels");
}

class HipProbeWithRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!libraryPresent(kDebianHipLibrary)) {
      GTEST_SKIP() << kDebianHipLibrary << " is not installed (Debian: libamdhip64-5)";
    }
  }
};

// The real runtime on a machine without an AMD GPU: hipInit (or the device count) fails, and the
// reason names HIP's error by name and number.
TEST_F(HipProbeWithRuntimeTest, NoGpuIsUnavailableWithHipError) {
  HipProbeOptions options;
  options.libraryNames = {kMissingLibrary, kDebianHipLibrary};  // falls through to the runtime
  ProbeOutcome outcome = probeInChild(options);
  ASSERT_TRUE(outcome.finished) << outcome.what;
  if (outcome.available) GTEST_SKIP() << "a HIP device is present: " << outcome.message;
  EXPECT_EQ(outcome.code, static_cast<int>(Code::Unavailable));
  EXPECT_EQ(outcome.message.rfind("HIP unavailable: ", 0), 0u) << outcome.message;
  bool initFailed = outcome.message.find("hipInit failed: hipError") != std::string::npos;
  bool noDevices = outcome.message.find("no devices (") != std::string::npos;
  EXPECT_TRUE(initFailed || noDevices) << outcome.message;
  EXPECT_NE(outcome.message.find("hipError"), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find(" ["), std::string::npos)
      << "no error number: " << outcome.message;
}

// Without the amdgpu compute node the reason says so; with it present it says nothing about it.
TEST_F(HipProbeWithRuntimeTest, ReasonMentionsMissingKfdOnlyWhenMissing) {
  HipProbeOptions missing;
  missing.libraryNames = {kDebianHipLibrary};
  missing.kfdPath = "/nonexistent/hc-test-kfd";
  ProbeOutcome outcome = probeInChild(missing);
  ASSERT_TRUE(outcome.finished) << outcome.what;
  if (outcome.available) GTEST_SKIP() << "a HIP device is present";
  EXPECT_NE(outcome.message.find("no /nonexistent/hc-test-kfd"), std::string::npos)
      << outcome.message;

  HipProbeOptions present = missing;
  present.kfdPath = "/dev/null";  // exists
  outcome = probeInChild(present);
  ASSERT_TRUE(outcome.finished) << outcome.what;
  EXPECT_EQ(outcome.message.find("no /dev/null"), std::string::npos) << outcome.message;
  EXPECT_EQ(outcome.message.rfind("HIP unavailable: ", 0), 0u) << outcome.message;
}

// The default options (so.6, then so.5) behave like the explicit list on this machine.
TEST_F(HipProbeWithRuntimeTest, DefaultOptionsDoNotCrashOrHang) {
  ProbeOutcome outcome = probeInChild(HipProbeOptions{});
  ASSERT_TRUE(outcome.finished) << outcome.what;
  if (outcome.available) GTEST_SKIP() << "a HIP device is present";
  EXPECT_EQ(outcome.message.rfind("HIP unavailable: ", 0), 0u) << outcome.message;
}

}  // namespace
}  // namespace hc::device
