// Connection: the process's one link to hetero-commd: the socket, the mapped segment with both
// rings, and the table of submitted requests. Every thread shares it; forked children get a new
// one (the segment is MADV_DONTFORK, the child closes the inherited descriptors).
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

#include "common/ipc/ring.h"
#include "common/status.h"

namespace hc::client {

struct CommState;

struct Request {
  uint64_t id = 0;
  std::shared_ptr<CommState> comm;  // null for requests that belong to no communicator
  bool tracked = true;              // false: the caller passed no request handle
  std::atomic<bool> done{false};
  Status status;       // valid once done
  uint64_t value = 0;  // valid once done
};
using RequestPtr = std::shared_ptr<Request>;

class Connection {
 public:
  // The process's connection, connecting on first use. Fails with Unavailable when no daemon
  // listens at HC_SOCKET (or the default path).
  static Result<Connection*> get();

  pid_t ownerPid() const { return pid_; }
  bool dead() const { return dead_.load(std::memory_order_acquire); }

  Result<void*> memAlloc(uint64_t bytes);
  Status memFree(void* ptr);
  // A reference to [p, p+bytes) in the segment heap; null with bytes 0 is "no buffer".
  Result<ipc::BufferRef> bufferRef(const void* p, uint64_t bytes) const;

  // Submits one entry (assigning its request id); waits for ring space if needed.
  Result<RequestPtr> submit(ipc::SubmitEntry entry, std::shared_ptr<CommState> comm, bool tracked);
  // Waits until ready() holds, the communicator (if any) is aborted, or the daemon is gone.
  Status waitUntil(const std::function<bool()>& ready, const CommState* comm);
  // Takes available completions; returns without blocking.
  void reap();

  // Tells the daemon to abort a communicator handle, fails the handle's local requests and
  // wakes every waiting thread.
  void abort(CommState* comm, uint64_t handle);

  // Called in a forked child: closes the inherited descriptors without taking any lock.
  void abandonInChild();

 private:
  Connection() = default;
  Status connect();
  Result<std::vector<uint8_t>> request(std::span<const uint8_t> frame, uint32_t requestId);
  void complete(const RequestPtr& r, const Status& status, uint64_t value);
  void markDead(const Status& why);
  bool daemonHungUp() const;

  pid_t pid_ = 0;
  int socket_ = -1;
  int segmentFd_ = -1;
  int daemonEventFd_ = -1;
  pid_t daemonPid_ = 0;
  ipc::SegmentView view_;
  uint64_t heapOffset_ = 0;
  uint64_t heapBytes_ = 0;
  uint32_t spinUs_ = 50;

  std::mutex socketMutex_;  // one request on the socket at a time
  uint32_t nextFrameId_ = 1;
  std::mutex submitMutex_;  // one producer on the submission ring
  uint64_t nextRequestId_ = 1;
  std::atomic<uint32_t> inFlight_{0};  // submitted, completion not yet taken
  std::mutex reapMutex_;               // guards pending_ and the completion ring's consumer side
  std::map<uint64_t, RequestPtr> pending_;
  std::atomic<bool> dead_{false};
  Status deadStatus_;
};

}  // namespace hc::client
