// Running hcctl (HC_HCCTL_PATH) from integration tests, starting the daemons it talks to, and
// finding the ports they log.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace hc::integ {

struct HcctlRun {
  int exitCode = -1;   // -1: it did not start, or did not exit within 20 s (then it is killed)
  std::string output;  // stdout and stderr
};

// Runs hcctl with `args`; its output file goes into `dir`.
inline HcctlRun hcctl(const std::vector<std::string>& args, const std::string& dir) {
  static int counter = 0;
  std::vector<std::string> argv = {HC_HCCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string error;
  auto child = ChildProcess::spawn(argv, {}, dir + "/hcctl-" + std::to_string(++counter) + ".out",
                                   &error);
  if (!child) return {-1, error};
  if (!child->waitExit(std::chrono::seconds(20))) return {-1, "hcctl did not exit"};
  return {child->exitCode(), child->output()};
}

// The port of the "<what> listening on 127.0.0.1:<port>" line ("control", "health").
inline int listenerPort(DaemonProcess& d, const std::string& what) {
  return loggedPort(d, what + " listening on 127.0.0.1:");
}

// Starts a daemon with `args` and waits for its "serving" line, which comes after every listener
// (admin socket, control and health ports) is up and the health statuses turned SERVING. Null,
// with the test failed, when it does not get there within 10 s.
inline std::unique_ptr<DaemonProcess> startServingDaemon(const std::vector<std::string>& args) {
  std::string error;
  auto d = DaemonProcess::start(args, &error);
  EXPECT_NE(d, nullptr) << error;
  if (d && !d->process().waitForOutput(std::string("hetero-commd ") + HC_VERSION + " serving",
                                       std::chrono::seconds(10))) {
    ADD_FAILURE() << "no \"serving\" line:\n" << d->logTail();
    return nullptr;
  }
  return d;
}

}  // namespace hc::integ
