// Connection: the process's one link to hetero-commd: the socket, the mapped segment with both
// rings, the table of submitted requests, the staging pool, and how host memory outside the
// segment reaches the daemon. Every thread shares it; forked children get a new one (the segment
// is MADV_DONTFORK, the child closes the inherited descriptors, and the new connection probes
// cross-memory attach again with the child's own /proc/self/mem). Connections are never freed:
// communicators and requests point at them.
// Depends on hc_common only: no daemon code, no gRPC.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "client/src/device_cache.h"
#include "client/src/device_runtime.h"
#include "client/src/done_flags.h"
#include "client/src/request.h"
#include "client/src/staging.h"
#include "client/src/submission.h"
#include "common/ipc/ring.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::client {

struct CommState;
class Connection;

// The device regions one operation names, from deviceRef until the daemon completed it (or the
// operation failed before submission): held by its Submission, then by its pending entry.
struct RegionUses {
  Connection* conn = nullptr;
  std::vector<uint32_t> regions;
  RegionUses() = default;
  RegionUses(const RegionUses&) = delete;
  RegionUses& operator=(const RegionUses&) = delete;
  ~RegionUses();
};

class Connection {
 public:
  // The process's connection, connecting on first use. Fails with Unavailable when no daemon
  // listens at HC_SOCKET (or the default path).
  static Result<Connection*> get();
  // The process's connection if one is open (never connects); null otherwise.
  static Connection* current();

  pid_t ownerPid() const { return pid_; }
  bool dead() const { return dead_.load(std::memory_order_acquire); }
  // The protocol minor the daemon announced in Welcome.
  uint16_t daemonMinor() const { return daemonMinor_; }
  StagingPool& staging() { return staging_; }
  PendingWrites& pendingWrites() { return pendingWrites_; }

  // Whether the daemon reads and writes this process's own memory (cross-memory attach), so host
  // memory outside the segment goes by address instead of through staging. Decided at connect:
  // HC_CROSS_MEMORY_ATTACH asked for it and the probe passed (cross_memory_attach.cc).
  bool crossMemoryAttach() const { return crossMemoryAttach_; }
  // "cross-memory attach", or "segment staging (<why not>)". Fixed at connect and never freed,
  // so hc_get_memory_path may hand out its characters.
  const std::string& memoryPath() const { return memoryPath_; }

  Result<void*> memAlloc(uint64_t bytes);
  Result<SegmentBlock> allocBlock(uint64_t bytes);
  Status memFree(void* ptr);
  // Multi-node (protocol minor 2): the daemon's Peer address ("" when it has none, or when the
  // daemon predates it), and naming the root daemon of a communicator key before its CommInit.
  Result<std::string> peerAddress();
  Status nameCommRoot(const uint8_t (&key)[16], const std::string& rootAddress);
  // The node's GPU `index` and how many there are (protocol minor 5; devices.cc). The reply's
  // text fields, figures and count were checked by validateFrame; its index is the one asked.
  Result<ipc::DeviceQueryReplyFrame> queryDevice(uint32_t index);
  // The small-operation area of a communicator handle (protocol minor 7): its reply, and the
  // area's memfd when reply.present is 1.
  struct AreaGrant {
    ipc::CommAreaReplyFrame reply{};
    UniqueFd fd;
  };
  Result<AreaGrant> commArea(uint64_t handle);
  uint32_t spinMicros() const { return spinUs_; }
  // Whether [p, p+bytes) (bytes > 0) is segment heap memory (true) or other host memory (false).
  // A range that straddles the heap's edge, a NULL pointer and a range that wraps are errors,
  // worded to follow the name of the buffer ("send buffer ").
  Result<bool> inSegment(const void* p, uint64_t bytes) const;
  // A reference to [p, p+bytes) in the segment heap; null with bytes 0 is "no buffer".
  Result<ipc::BufferRef> bufferRef(const void* p, uint64_t bytes) const;

  // Submits the prepared entries of one unit back to back, so no other thread's entry lands
  // between them, and gives each request its wire id. Waits for completion credits before the
  // unit and for ring space inside it: a unit larger than the ring streams through it as the
  // daemon takes entries. On failure (daemon gone, communicator aborted) entries already pushed
  // stay pending until the daemon completes them; the caller fails the requests.
  Status submitUnit(std::span<Submission> unit);
  // Waits until ready() holds, the communicator (if any) is aborted, or the daemon is gone.
  Status waitUntil(const std::function<bool()>& ready, const CommState* comm);
  // Takes available completions; returns without blocking.
  void reap();
  // reap(), and notices a daemon that hung up (failing every pending request). Non-blocking:
  // stream waits call it between sleeps.
  void poll();
  // poll() for callers that may run in a tight loop (hc_comm_get_async_error under a watchdog):
  // the hang-up check, a system call, runs at most once per kHangUpCheckInterval.
  void pollThrottled();

  // Device memory (protocol minor 3; connection_device.cc). A reference to [p, p+bytes) of the
  // device allocation `at` of runtime `rt` for the operation `sub`: the allocation is exported
  // and registered with the daemon on first use, and the region is cached by (runtime,
  // allocation id) (device_cache.h says when it is dropped). The region counts as used by `sub`
  // until the daemon completes it, so no release can reach the daemon before its entry.
  Result<ipc::BufferRef> deviceRef(DeviceRuntime* rt, const DevicePointer& at, const void* p,
                                   uint64_t bytes, Submission* sub);
  // hc_comm_register of device memory: registers `at` now (so its first operation imports
  // nothing) and pins it, so no automatic release drops it until unpinDevice.
  Status pinDevice(DeviceRuntime* rt, const DevicePointer& at);
  void unpinDevice(const char* runtime, uint64_t allocationId);
  // The runtime freed an allocation: its registration (if any) is dropped here and in the daemon
  // (once operations still using it completed; the daemon keeps their mapping until they end).
  void forgetDeviceAllocation(const char* runtime, uint64_t allocationId);
  // The ends of operations' uses of regions (RegionUses' destructor). Never blocks on the socket.
  void endRegionUses(const std::vector<uint32_t>& regions);
  DoneFlagPool& doneFlags() { return doneFlags_; }

  // Tells the daemon to abort a communicator handle, fails the handle's local requests and
  // wakes every waiting thread.
  void abort(CommState* comm, uint64_t handle);

  // Called in a forked child: closes the inherited descriptors without taking any lock.
  void abandonInChild();
  // Library teardown (unload or exit): gives idle staging blocks back, unless that would wait.
  void teardown();

 private:
  // A submitted entry: its request, and the staging block the daemon may use until the entry's
  // completion arrives, even when the request was already failed locally (abort).
  struct PendingEntry {
    RequestPtr request;
    std::shared_ptr<Staging> staging;
    std::shared_ptr<RegionUses> regionUses;  // released with the entry, at its completion
  };

  // What the cross-memory-attach probe left behind.
  enum class ProbeOutcome {
    Decided,         // memoryPath_ says which path; the connection is fine either way
    ConnectionLost,  // the daemon did not answer with CmaProbeReply and dropped the connection
  };

  Connection() = default;
  // A connected Connection with its memory path decided; cleans up after itself on failure.
  static Result<Connection*> open();
  Status connect();
  // Undoes connect() of a connection that was never shared (descriptors, mapping) and frees it.
  void discard();
  // Asks the daemon to read and write this process's memory (protocol.h, CmaProbeFrame) and
  // records the outcome in crossMemoryAttach_ and memoryPath_. Before the connection is shared.
  ProbeOutcome probeCrossMemoryAttach();
  Result<std::vector<uint8_t>> request(std::span<const uint8_t> frame, uint32_t requestId,
                                       std::span<const int> fds = {});
  Status pushEntry(const ipc::SubmitEntry& entry, const CommState* comm);
  void markDead(const Status& why);
  // MemRegister of `at` (the socket round trip); the region id.
  Result<uint32_t> registerAllocation(DeviceRuntime* rt, const DevicePointer& at);
  // registerAllocation, releasing least recently used idle regions while the daemon refuses it
  // at its cap (NoResource); the new region counts one use.
  Result<uint32_t> registerCached(DeviceRuntime* rt, const DevicePointer& at);
  // Sends MemUnregister for every region the cache gave up (DeviceRegionCache::takeDoomed).
  void unregisterDoomed();
  bool daemonHungUp() const;
  Status noticeHangUp();

  pid_t pid_ = 0;
  int socket_ = -1;
  int segmentFd_ = -1;
  int daemonEventFd_ = -1;
  pid_t daemonPid_ = 0;
  uint16_t daemonMinor_ = 0;
  ipc::SegmentView view_;
  uint64_t heapOffset_ = 0;
  uint64_t heapBytes_ = 0;
  uint32_t spinUs_ = 50;
  bool crossMemoryAttach_ = false;
  std::string memoryPath_;

  std::mutex socketMutex_;  // one request on the socket at a time
  uint32_t nextFrameId_ = 1;
  std::mutex submitMutex_;  // one producer on the submission ring
  uint64_t nextRequestId_ = 1;
  std::atomic<uint32_t> inFlight_{0};  // submitted, completion not yet taken
  std::mutex reapMutex_;               // guards pending_ and the completion ring's consumer side
  std::map<uint64_t, PendingEntry> pending_;
  std::atomic<bool> dead_{false};
  std::atomic<int64_t> lastHangUpCheckNs_{0};
  Status deadStatus_;
  StagingPool staging_{this};
  PendingWrites pendingWrites_;
  std::mutex deviceMutex_;  // guards cache_; never held across a socket request
  DeviceRegionCache cache_;
  DoneFlagPool doneFlags_{this};
};

}  // namespace hc::client
