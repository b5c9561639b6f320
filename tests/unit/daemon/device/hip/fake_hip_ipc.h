// What the two fake HIP runtimes agree on, so that memory one hands out the other maps: the
// client-side fake (fake_libamdhip64_client.cc) exports hipMalloc memory by legacy IPC handle, and
// the fake a daemon loads (fake_libamdhip64.cc over fake_hip_runtime.cc) opens that handle, as the
// real runtimes of a client and a daemon would. Both also place the same GPUs on the PCI bus, since
// the daemon finds a client's GPU by its PCI address. Depends on libc only.
#pragma once

#include <cstdint>
#include <cstring>

namespace hc::device::fake_hip {

// GPUs each fake reports: device d sits at PCI 0000:(kFirstPciBus + d):00.0.
constexpr int kDevices = 2;
constexpr int kFirstPciBus = 0xC1;
// HIP 5.2, matching the headers the fakes are compiled against.
constexpr int kRuntimeVersion = 50'200'000;

// Marks a handle that names a memfd (hipMalloc memory of the client-side fake); a handle without
// it names memory of the opening process only (an allocation a unit test declared).
constexpr uint64_t kIpcMagic = 0x6863666b68697001;  // "hcfkhip" + 1

// The first bytes of hipIpcMemHandle_t's 64. The address comes first: the client seam's tests
// read it back. Another process maps the memory through /proc/<pid>/fd/<fd>.
struct IpcHandle {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t magic = 0;  // kIpcMagic when pid and fd are set
  uint64_t pid = 0;
  uint64_t fd = 0;
};
constexpr size_t kIpcHandleBytes = 64;  // sizeof(hipIpcMemHandle_t)
static_assert(sizeof(IpcHandle) <= kIpcHandleBytes);

inline void writeIpcHandle(const IpcHandle& handle, void* out) {
  std::memset(out, 0, kIpcHandleBytes);
  std::memcpy(out, &handle, sizeof(handle));
}

inline IpcHandle readIpcHandle(const void* in) {
  IpcHandle handle;
  std::memcpy(&handle, in, sizeof(handle));
  return handle;
}

}  // namespace hc::device::fake_hip
