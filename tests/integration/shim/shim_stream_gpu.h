// The GPU runtime of a stream-check rank (shim_stream_rank.cc): a fake one, loaded by path before
// the shim's first call, as a framework loads its runtime before it calls NCCL. The libnccl.so.2
// build runs over the fake CUDA driver (tests/unit/daemon/device/cuda, SONAME libcuda.so.1:
// shim_stream_gpu_cuda.cc), the librccl.so.1 build over the fake HIP runtime
// (tests/unit/daemon/device/hip, SONAME libamdhip64.so.5: shim_stream_gpu_hip.cc). Both run each
// stream as a queue with a worker thread and log every item ("<seq> <stream> <what>"), which the
// checks read to see in what order the work ran. Threads: any, unless a method says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hc::shim_stream {

// One line of the fake's stream log.
struct LogLine {
  uint64_t seq = 0;
  std::string stream;  // "stream1", "legacy0" (CUDA), "null0" (HIP), "note"
  std::string what;    // "kernel produce-a end", "host-fn begin", "wait 0x... >= 1 satisfied"
};

class FakeGpu {
 public:
  using HostFn = void (*)(void*);

  // Loads the fake and does what a framework does first: initializes it and makes device 0 the
  // calling thread's current device (CUDA: its primary context retained and pushed). Call from the
  // thread that issues the collectives. Null with *error on failure.
  static std::unique_ptr<FakeGpu> load(std::string* error);
  virtual ~FakeGpu() = default;

  virtual const char* runtime() const = 0;  // "cuda" or "hip"
  // Whether the daemon can map this runtime's device memory, so that operations may take it as
  // buffers. Both fakes' IPC handles name a memfd that the rank's daemon, given the matching
  // daemon-side fake as its runtime, opens through /proc; VMM allocations travel as their fd.
  virtual bool daemonMapsDeviceMemory() const = 0;

  // A stream as the framework makes one; null with *error on failure.
  virtual void* newStream(std::string* error) = 0;
  virtual bool destroyStream(void* stream) = 0;
  // A "kernel" on stream (null: the runtime's NULL stream, for the current context or device):
  // sleeps delayMs, then runs fn(arg) on the stream's worker.
  virtual bool kernel(void* stream, const char* label, int delayMs, HostFn fn, void* arg) = 0;
  virtual bool setCapturing(void* stream, bool capturing) = 0;
  // cuStreamSynchronize / hipStreamSynchronize.
  virtual bool synchronize(void* stream) = 0;
  // The stream's name in the log; "" when the fake does not know it.
  virtual std::string streamName(void* stream) = 0;
  // Adds "<seq> note <text>" to the log; returns its seq.
  virtual uint64_t note(const std::string& text) = 0;
  virtual std::vector<LogLine> log() = 0;
  // true when ptr is device memory the fake allocated (cuMemAlloc / hipMalloc memory, said so by
  // the runtime's own pointer query); *bytes the allocation's size.
  virtual bool isDeviceMemory(const void* ptr, size_t* bytes) = 0;
  // A VMM allocation (cuMemCreate + cuMemMap, exportable as a POSIX fd), or null where the daemon
  // could not map it.
  virtual void* newVmmAllocation(size_t bytes) = 0;
  virtual void freeVmmAllocation(void* base) = 0;
};

// Parses the fake's log text into lines.
std::vector<LogLine> parseLog(const std::string& text);

}  // namespace hc::shim_stream
