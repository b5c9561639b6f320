// The two ways a client hands GPU memory to the daemon, each between two freshly exec'd
// processes that initialise CUDA themselves: A allocates and fills, B imports, checks and writes
// back, A checks. runPair() (probe_util.cc) starts them; A prints the result and B reports to A.
//
// cuda_ipc_legacy: cuMemAlloc memory, named by the 64 bytes of cuIpcGetMemHandle.
// cuda_vmm_fd: cuMemCreate memory created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
// requested, exported as an fd (cuMemExportToShareableHandle) passed by SCM_RIGHTS, imported and
// mapped by B as the daemon does (daemon/device/cuda/cuda_import.cc).
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/gpu/cuda_driver.h"
#include "tests/gpu/probe.h"

namespace hc::gpuprobe {
namespace {

constexpr size_t kBytes = 1 << 20;
constexpr uint32_t kPatternA = 0xA11CE5EDu;  // A's fill, which B checks
constexpr uint32_t kPatternB = 0xB0B5CAFEu;  // B's fill, which A checks

std::string microsSince(int64_t start) {
  return formatMicros(static_cast<double>(monotonicMicros() - start));
}

// B's side of every pair: wait for A's message, do `work` when CUDA started, and tell A how it
// went. A that ended first (no driver: it skipped) makes B leave quietly.
template <typename Work>
Outcome peerB(const ProbeOptions& options, Work work) {
  CudaSession session;
  const Outcome started = session.start(options, true);
  note("B", "waiting for A's allocation");
  PeerMessage message{};
  int fd = -1;
  const std::string why = receivePeer(options.sockFd, &message, &fd);
  if (!why.empty()) {
    return started.verdict != Verdict::Pass ? started : fail("B: nothing from A: " + why);
  }
  Outcome part = started;
  if (started.verdict == Verdict::Pass) {
    part = message.bytes == 0 || message.bytes % 4 != 0 || message.bytes > (1u << 30)
               ? fail("B: A's message names " + std::to_string(message.bytes) + " bytes")
               : work(session, message, fd);
  }
  if (fd >= 0) ::close(fd);
  PeerMessage reply{};
  reply.ok = part.verdict == Verdict::Pass ? 1 : 0;
  // Failures inside `work` already name B; those of its start do not.
  std::string text = part.text;
  if (part.verdict == Verdict::Skip) {
    text = "B: skipped " + text;
  } else if (part.verdict == Verdict::Fail && text.compare(0, 3, "B: ") != 0) {
    text = "B: " + text;
  }
  setPeerText(&reply, text);
  const std::string sent = sendPeer(options.sockFd, reply);
  if (!sent.empty() && part.verdict == Verdict::Pass) return fail("B: " + sent);
  note("B", std::string("done: ") + verdictName(part.verdict) + " " + part.text);
  return part;
}

// A's side after it sent its message: B's reply, then B's pattern in A's memory.
Outcome finishA(CudaSession& session, const ProbeOptions& options, const std::string& sendError,
                CUdeviceptr ptr, size_t bytes, const std::string& figures) {
  note("A", "waiting for B");
  PeerMessage reply{};
  const std::string why = receivePeer(options.sockFd, &reply);
  if (!why.empty()) {
    return fail("A: no reply from B: " + why + (sendError.empty() ? "" : "; " + sendError));
  }
  if (reply.ok != 1) return fail(reply.text);
  size_t bad = 0;
  const std::string copied = session.countMismatches(ptr, bytes, kPatternB, &bad);
  if (!copied.empty()) return fail("A: " + copied);
  if (bad != 0) {
    return fail("A: " + std::to_string(bad) + " of " + std::to_string(bytes / 4) +
                " words are not B's pattern");
  }
  return pass(figures + " " + reply.text);
}

// B: checks A's pattern at ptr, then writes its own and waits until the GPU wrote it.
Outcome checkAndWriteBack(CudaSession& session, CUdeviceptr ptr, size_t bytes) {
  CudaDriver& d = session.driver();
  size_t bad = 0;
  const std::string copied = session.countMismatches(ptr, bytes, kPatternA, &bad);
  if (!copied.empty()) return fail("B: " + copied);
  if (bad != 0) {
    return fail("B: " + std::to_string(bad) + " of " + std::to_string(bytes / 4) +
                " words are not A's pattern");
  }
  HC_PROBE_CU(d, "B: ", memsetD32, ptr, kPatternB, bytes / 4);
  HC_PROBE_CU(d, "B: ", ctxSynchronize);
  return pass("");
}

Outcome ipcA(const ProbeOptions& options) {
  CudaSession session;
  if (Outcome started = session.start(options, true); started.verdict != Verdict::Pass) {
    return started;
  }
  CudaDriver& d = session.driver();
  note("A", "cuMemAlloc");
  CUdeviceptr ptr = 0;
  HC_PROBE_CU(d, "A: ", memAlloc, &ptr, kBytes);
  Undo freeMemory([&] { (void)d.memFree(ptr); });
  HC_PROBE_CU(d, "A: ", memsetD32, ptr, kPatternA, kBytes / 4);
  HC_PROBE_CU(d, "A: ", ctxSynchronize);
  CUipcMemHandle handle{};
  const int64_t start = monotonicMicros();
  HC_PROBE_CU(d, "A: ", ipcGetMemHandle, &handle, ptr);
  const std::string getMicros = microsSince(start);

  PeerMessage message{};
  message.bytes = kBytes;
  static_assert(sizeof(handle) == sizeof(message.handle));
  std::memcpy(message.handle, &handle, sizeof(handle));
  // A failed send is reported with B's reply, which says why B left.
  const std::string sent = sendPeer(options.sockFd, message);
  return finishA(session, options, sent, ptr, kBytes,
                 "bytes=" + std::to_string(kBytes) + " get_handle_us=" + getMicros);
}

Outcome ipcB(CudaSession& session, const PeerMessage& message, int) {
  CudaDriver& d = session.driver();
  CUipcMemHandle handle;
  std::memcpy(&handle, message.handle, sizeof(handle));
  note("B", "cuIpcOpenMemHandle");
  CUdeviceptr ptr = 0;
  int64_t start = monotonicMicros();
  // As the daemon opens them: the allocation may live on another GPU of the node.
  HC_PROBE_CU(d, "B: ", ipcOpenMemHandle, &ptr, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  const std::string openMicros = microsSince(start);
  bool open = true;
  Undo closeHandle([&] {
    if (open) (void)d.ipcCloseMemHandle(ptr);
  });
  if (Outcome part = checkAndWriteBack(session, ptr, message.bytes);
      part.verdict != Verdict::Pass) {
    return part;
  }
  start = monotonicMicros();
  open = false;
  HC_PROBE_CU(d, "B: ", ipcCloseMemHandle, ptr);
  return pass("open_us=" + openMicros + " close_us=" + microsSince(start));
}

// The properties of a device allocation that may be exported as a POSIX fd.
CUmemAllocationProp fdExportableProp(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// Maps `allocation` read-write for the session's device at a new reservation of `bytes`; undone
// by unmapVmm().
Outcome mapVmm(CudaSession& session, const char* who, CUmemGenericAllocationHandle allocation,
               size_t bytes, size_t alignment, CUdeviceptr* va) {
  CudaDriver& d = session.driver();
  HC_PROBE_CU(d, who, memAddressReserve, va, bytes, alignment, 0, 0);
  if (const CUresult mapped = d.memMap(*va, bytes, 0, allocation, 0); mapped != CUDA_SUCCESS) {
    (void)d.memAddressFree(*va, bytes);
    *va = 0;
    return fail(who + d.describe(mapped, d.memMap.name));
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = session.device();
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  HC_PROBE_CU(d, who, memSetAccess, *va, bytes, &access, 1);
  return pass("");
}

void unmapVmm(CudaDriver& d, CUdeviceptr va, size_t bytes) {
  if (va == 0) return;
  (void)d.memUnmap(va, bytes);
  (void)d.memAddressFree(va, bytes);
}

Outcome vmmA(const ProbeOptions& options) {
  CudaSession session;
  if (Outcome started = session.start(options, true); started.verdict != Verdict::Pass) {
    return started;
  }
  CudaDriver& d = session.driver();
  const std::string attributes =
      "vmm_attr=" +
      std::to_string(session.attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) +
      " posix_fd_attr=" +
      std::to_string(
          session.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED));
  const CUmemAllocationProp prop = fdExportableProp(session.device());
  size_t granularity = 0;
  size_t recommended = 0;
  HC_PROBE_CU(d, "A: ", memGetAllocationGranularity, &granularity, &prop,
              CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  HC_PROBE_CU(d, "A: ", memGetAllocationGranularity, &recommended, &prop,
              CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (granularity == 0) granularity = 1;
  const size_t bytes = (kBytes + granularity - 1) / granularity * granularity;

  note("A", "cuMemCreate");
  CUmemGenericAllocationHandle allocation = 0;
  if (const CUresult created = d.memCreate(&allocation, bytes, &prop, 0); created != CUDA_SUCCESS) {
    return fail("A: " + d.describe(created, d.memCreate.name) + " (" + attributes + ")");
  }
  Undo release([&] { (void)d.memRelease(allocation); });
  CUdeviceptr va = 0;
  Undo unmap([&] { unmapVmm(d, va, bytes); });
  if (Outcome mapped = mapVmm(session, "A: ", allocation, bytes, granularity, &va);
      mapped.verdict != Verdict::Pass) {
    return mapped;
  }
  HC_PROBE_CU(d, "A: ", memsetD32, va, kPatternA, bytes / 4);
  HC_PROBE_CU(d, "A: ", ctxSynchronize);

  note("A", "cuMemExportToShareableHandle");
  int fd = -1;
  const int64_t start = monotonicMicros();
  if (const CUresult exported = d.memExportToShareableHandle(
          &fd, allocation, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      exported != CUDA_SUCCESS) {
    return fail("A: " + d.describe(exported, d.memExportToShareableHandle.name) + " (" +
                attributes + ")");
  }
  const std::string exportMicros = microsSince(start);
  PeerMessage message{};
  message.bytes = bytes;
  const std::string sent = sendPeer(options.sockFd, message, fd);
  // SCM_RIGHTS gave B its own descriptor; this one is ours to close.
  ::close(fd);
  return finishA(session, options, sent, va, bytes,
                 "bytes=" + std::to_string(bytes) + " granularity=" + std::to_string(granularity) +
                     " recommended=" + std::to_string(recommended) + " " + attributes +
                     " export_us=" + exportMicros);
}

Outcome vmmB(CudaSession& session, const PeerMessage& message, int fd) {
  CudaDriver& d = session.driver();
  if (fd < 0) return fail("B: A's message came without a descriptor");
  note("B", "cuMemImportFromShareableHandle");
  CUmemGenericAllocationHandle allocation = 0;
  const int64_t start = monotonicMicros();
  HC_PROBE_CU(d, "B: ", memImportFromShareableHandle, &allocation,
              reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  const std::string importMicros = microsSince(start);
  Undo release([&] { (void)d.memRelease(allocation); });
  const CUmemAllocationProp prop = fdExportableProp(session.device());
  size_t granularity = 0;
  HC_PROBE_CU(d, "B: ", memGetAllocationGranularity, &granularity, &prop,
              CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (granularity == 0) granularity = 1;
  CUdeviceptr va = 0;
  Undo unmap([&] { unmapVmm(d, va, message.bytes); });
  if (Outcome mapped = mapVmm(session, "B: ", allocation, message.bytes, granularity, &va);
      mapped.verdict != Verdict::Pass) {
    return mapped;
  }
  if (Outcome part = checkAndWriteBack(session, va, message.bytes); part.verdict != Verdict::Pass) {
    return part;
  }
  return pass("import_us=" + importMicros);
}

}  // namespace

Outcome probeCudaIpcLegacy(const ProbeOptions& options) {
  if (options.role.empty()) return runPair(options, "cuda_ipc_legacy");
  if (options.role == "a") return ipcA(options);
  return peerB(options, ipcB);
}

Outcome probeCudaVmmFd(const ProbeOptions& options) {
  if (options.role.empty()) return runPair(options, "cuda_vmm_fd");
  if (options.role == "a") return vmmA(options);
  return peerB(options, vmmB);
}

}  // namespace hc::gpuprobe
