// hc::device::Device: what the daemon asks of a node's memory and compute, whatever the vendor.
// This header holds the interface and its plain value types; implementations live in host/,
// sim/, cuda/ and hip/, each behind this interface.
// Depends on hc_common only: coll/ and session/ use devices, never the other way round, so the
// reduction math reaches a device as a kernel it was given (see host/host_device.h), and vendor
// APIs stay inside their own folder.
//
// The work model follows CUDA streams: copies and reductions are enqueued on a stream and run in
// enqueue order; an event recorded on a stream completes when everything enqueued before it has.
// No call here throws; every failure is a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/vocabulary.h"

namespace hc::device {

enum class Vendor : uint8_t { Host, Nvidia, Amd };
// Where a buffer's memory lives: plain host memory, a simulated device (memfd), or GPU memory.
enum class MemoryType : uint8_t { Host, Sim, Cuda, Hip };

const char* vendorName(Vendor vendor);        // "host", "nvidia", "amd"
const char* memoryTypeName(MemoryType type);  // "host", "sim", "cuda", "hip"

struct DeviceInfo {
  int index = 0;  // unique per vendor on this node
  Vendor vendor = Vendor::Host;
  std::string backend;  // "host", "sim", "cuda", "hip"
  std::string model;
  uint64_t memoryBytes = 0;
  std::string pciBusId;  // "0000:3b:00.0"; empty for the host
};

// "<backend> <vendor>:<index>" ("cuda nvidia:1", "sim amd:0"): how logs and errors name a device.
std::string deviceLabel(const DeviceInfo& info);

// What a device can do, declared before anyone asks, so that callers choose a path up front
// instead of trying and failing on the data path.
struct Capabilities {
  // importBuffer() accepts handles exported by another process (IPC handles, memfds).
  bool ipcImport = false;
  // reduceAsync() works. Without it, reductions stage through host memory.
  bool reduceKernels = false;
  // Enqueued work runs asynchronously, in stream order, while the enqueuing call returns at once.
  // Without it, each copy or reduction runs to completion inside the enqueuing call, on the
  // caller's thread: the same ordering, but a progress thread should hand large work to the
  // reduction pool rather than enqueue it itself.
  bool streamOrdering = false;
  // allocPinned() returns page-locked memory registered with the device, so copies between it
  // and device memory run at DMA speed (the CPU-forwarding pipeline). Without it allocPinned()
  // still works but returns ordinary host memory.
  bool pinnedStaging = false;
  // copyAsync() also reaches memory of this backend's other devices in this process (their
  // imports and allocDevice() memory), as CUDA's and HIP's unified addressing lets one copy move
  // bytes between two GPUs (directly over a peer link, or staged by the driver). Kernels are not
  // assumed to reach a peer's memory: reduceAsync() reads and writes this device's own memory,
  // so a reduction across devices copies its operands to one device first.
  bool peerCopy = false;
  // How a Transport would address this device's memory if it read and wrote it in place:
  // {Cuda} for a CUDA GPU, {Hip} for a HIP GPU, {Host} for the host. Empty: only host copies
  // reach it. Whether a given transport moves that type, zero-copy, is probed per daemon
  // (staging/direct_probe.h).
  std::vector<MemoryType> transportMemory;

  bool transportCanAccess(MemoryType type) const;
};

// A buffer as a client names it: by reference, never by copy. The meaning of `bytes` belongs to
// the backend of `type` (an address for in-process host memory, a cudaIpcMemHandle_t, a sim
// allocation id, ...).
struct BufferHandle {
  MemoryType type = MemoryType::Host;
  std::vector<uint8_t> bytes;  // opaque
  // Borrowed: a memfd, VMM or dma-buf fd that came with the handle over SCM_RIGHTS, or -1.
  // importBuffer() duplicates it if it needs to keep it; the caller closes its own.
  int fd = -1;
  uint64_t size = 0;  // bytes of the allocation
};

// A buffer mapped into this device. Owned by the caller until releaseBuffer().
struct ImportedBuffer {
  void* ptr = nullptr;  // usable by this device's copyAsync() and reduceAsync()
  uint64_t size = 0;
  uint64_t id = 0;  // unique among this device's live imports; 0 = not imported
};

using StreamId = uint32_t;  // 0 is never a valid stream
using EventId = uint64_t;   // 0 is never a valid event

// One reduction for reduceAsync(): the same fields as coll::ReduceSpec, kept here so that device/
// does not depend on coll/ (coll builds a ReduceSpec from it in a few lines). Elements
// [0, count) of every input are combined and the result is stored to every output.
struct ReduceWork {
  Dtype dtype = Dtype::Int8;
  RedOp redop = RedOp::Sum;
  std::span<const void* const> inputs;  // inputs[i] = rank i's buffer (already offset)
  std::span<void* const> outputs;       // every buffer that receives the result
  // PreMulSum: one scalar per input (its bytes in dtype, little-endian, zero-padded); else empty.
  std::span<const uint64_t> scalars;
  size_t nRanks = 0;  // divisor for Avg (usually inputs.size())
  size_t count = 0;   // elements
};

// A host function that combines elements [begin, end) of every input of `work` into every
// output, for the devices that reduce on the CPU (host, sim). Called on the thread that enqueued
// the work; must not throw. The daemon passes one that calls coll::reduceRange(); tests pass
// their own. Here rather than beside HostDevice so the registry and the sim device need not
// include an implementation to name it.
using ReduceKernel = std::function<void(const ReduceWork& work, size_t begin, size_t end)>;

// Threads: every method may be called from any thread; an implementation serializes what it must.
// Work enqueued on one stream from several threads runs in the order the calls happened.
// Ownership: the DeviceRegistry owns devices; everything else borrows them and must not outlive
// the registry. Streams, events, imports and pinned allocations belong to the caller that created
// them and are returned with the matching call (create/destroy, record/release, import/release,
// alloc/free); a device destroyed with some still live reclaims them.
// Errors: the call that detects an error returns it; out-values are valid only on success. Work
// that fails after it was enqueued (a GPU fault) is reported by the next queryEvent() or
// synchronize() on that stream as DeviceError, and the stream stays failed, like a CUDA sticky
// error: destroy it.
class Device {
 public:
  virtual ~Device() = default;

  virtual const DeviceInfo& info() const = 0;
  virtual const Capabilities& capabilities() const = 0;

  // Maps a client's buffer. InvalidArgument when the handle's memory type or form is not one
  // this device imports (the message says which it accepts); NoResource when mapping failed for
  // lack of memory or address space. May block (driver calls): control path only, once per
  // allocation; the session caches imports by (client, allocation id).
  [[nodiscard]] virtual Result<ImportedBuffer> importBuffer(const BufferHandle& handle) = 0;
  // Unmaps it and resets `buffer` on success. No work that uses it may still be pending (record
  // an event after the last use and wait for it). NotFound for a buffer this device did not
  // import or already released.
  [[nodiscard]] virtual Status releaseBuffer(ImportedBuffer& buffer) = 0;

  // Host memory for staging, page aligned. May block: allocate once, never per call.
  [[nodiscard]] virtual Result<void*> allocPinned(size_t bytes) = 0;
  // NotFound for a pointer allocPinned() did not return.
  [[nodiscard]] virtual Status freePinned(void* ptr) = 0;

  // Memory on the device for the daemon's own use (the scratch of a reduction across devices),
  // aligned for any dtype. May block and synchronize the device: allocate once and keep it.
  // NoResource when the device is out of memory; Unavailable on a device without memory of its
  // own (the host).
  [[nodiscard]] virtual Result<void*> allocDevice(size_t bytes) = 0;
  // No work that uses it may still be pending. NotFound for a pointer allocDevice() did not
  // return.
  [[nodiscard]] virtual Status freeDevice(void* ptr) = 0;

  [[nodiscard]] virtual Result<StreamId> createStream() = 0;
  // Waits for the stream's pending work, then destroys it.
  [[nodiscard]] virtual Status destroyStream(StreamId stream) = 0;

  // Non-blocking when capabilities().streamOrdering; otherwise runs to completion before it
  // returns. Copies `bytes` bytes from src to dst after the stream's earlier work. Both ranges
  // must be memory this device can access (an import, pinned memory, or host memory on the host
  // device) and stay valid until the copy completes. dst == src is a no-op; any other overlap is
  // InvalidArgument. NotFound for an unknown stream.
  [[nodiscard]] virtual Status copyAsync(StreamId stream, void* dst, const void* src,
                                         size_t bytes) = 0;
  // Same rules as copyAsync(). The descriptor (spans and scalars) is copied at enqueue, so it
  // may go away when this returns; the buffers it names must stay valid until the work
  // completes. InvalidArgument for a malformed descriptor (no inputs or outputs, null buffers
  // with count > 0, scalars.size() not 0 or inputs.size()); DeviceError when
  // !capabilities().reduceKernels.
  [[nodiscard]] virtual Status reduceAsync(StreamId stream, const ReduceWork& work) = 0;

  // Non-blocking. Returns an event that completes when every op enqueued on `stream` before
  // this call has. Release it with releaseEvent().
  [[nodiscard]] virtual Result<EventId> recordEvent(StreamId stream) = 0;
  // Non-blocking. true once the event completed, false while work before it is pending.
  [[nodiscard]] virtual Result<bool> queryEvent(EventId event) = 0;
  [[nodiscard]] virtual Status releaseEvent(EventId event) = 0;
  // Blocks until every op enqueued on `stream` has completed. Control path and tests; the data
  // path polls events instead.
  [[nodiscard]] virtual Status synchronize(StreamId stream) = 0;
};

using DevicePtr = std::unique_ptr<Device>;

}  // namespace hc::device
