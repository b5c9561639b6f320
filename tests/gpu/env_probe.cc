// env: the machine in one line, so that every other line can be read against it: the kernel
// (gVisor reports 4.4.0, and its build string), glibc, and where a driver is, the driver and the
// device the CUDA primitives use.
#include <gnu/libc-version.h>
#include <sys/utsname.h>

#include <cerrno>
#include <string>

#include "tests/gpu/cuda_driver.h"
#include "tests/gpu/probe.h"

namespace hc::gpuprobe {
namespace {

// "dev0=\"NVIDIA H100\"": a name with its quotes, so that the spaces in it stay one figure.
std::string quoted(const char* text) { return std::string("\"") + text + "\""; }

const char* computeModeName(int mode) {
  switch (mode) {
    case CU_COMPUTEMODE_DEFAULT:
      return "default";
    case CU_COMPUTEMODE_PROHIBITED:
      return "prohibited";
    case CU_COMPUTEMODE_EXCLUSIVE_PROCESS:
      return "exclusive_process";
    default:
      return "unknown";
  }
}

// The CUDA part: "driver=... devices=..." or "cuda=SKIP (...)"; never a failure of env.
std::string describeCudaEnvironment(const ProbeOptions& options) {
  CudaSession session;
  const Outcome started = session.start(options, false);
  CudaDriver& d = session.driver();
  int version = 0;
  std::string text;
  if (d.driverGetVersion.fn != nullptr && d.driverGetVersion(&version) == CUDA_SUCCESS) {
    text = "driver=" + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +
           " entry_points=" + d.resolvedBy() + " ";
  }
  if (started.verdict != Verdict::Pass) {
    return text + "cuda=" + verdictName(started.verdict) + " " + started.text;
  }
  int count = 0;
  (void)d.deviceGetCount(&count);
  char name[256] = "?";
  (void)d.deviceGetName(name, sizeof(name), session.device());
  size_t total = 0;
  (void)d.deviceTotalMem(&total, session.device());
  char bus[32] = "?";
  (void)d.deviceGetPCIBusId(bus, sizeof(bus), session.device());
  const std::string dev = "dev" + std::to_string(options.device);
  return text + "devices=" + std::to_string(count) + " " + dev + "=" + quoted(name) + " " + dev +
         "_cc=" + std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)) +
         "." + std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)) +
         " " + dev + "_mem_mib=" + std::to_string(total >> 20) + " " + dev +
         "_compute_mode=" + computeModeName(session.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE)) +
         " " + dev + "_pci=" + bus;
}

}  // namespace

Outcome probeEnv(const ProbeOptions& options) {
  utsname names{};
  if (::uname(&names) != 0) return fail("uname: " + errnoText(errno));
  const std::string text = std::string("kernel=") + names.release + " arch=" + names.machine +
                           " kernel_build=\"" + names.version +
                           "\" glibc=" + ::gnu_get_libc_version();
  // Noted first: should the driver hang, the runner's timeout line still names the machine.
  note("env", text);
  return pass(text + " " + describeCudaEnvironment(options));
}

}  // namespace hc::gpuprobe
