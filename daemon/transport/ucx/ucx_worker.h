// UcxWorker: one UCP context (features TAG and WAKEUP) and its one worker, in single-threaded
// mode, configured from UcxOptions. Private to daemon/transport/ucx.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "daemon/transport/ucx/ucx_transport.h"

namespace hc::transport::ucx {

class UcxWorker {
 public:
  // Reads UCX's configuration from the environment, then overrides from `options`:
  // TLS <- transports, NET_DEVICES <- socketIfname resolved on this host, KEEPALIVE_INTERVAL.
  [[nodiscard]] static Result<std::unique_ptr<UcxWorker>> create(const UcxOptions& options);
  // Destroys the worker, then the context. Every endpoint must have been closed first.
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }
  // Readable after ucp_worker_arm() when the worker has events. Owned by UCX.
  int eventFd() const { return eventFd_; }
  // ucp_worker_get_address(), copied.
  const std::vector<uint8_t>& address() const { return address_; }
  // The memory types UCX can move, a bit per ucs_memory_type_t (ucp_context_query): host only
  // for a UCX built without CUDA or ROCm support, as Debian's is.
  uint64_t memoryTypes() const { return memoryTypes_; }

 private:
  UcxWorker() = default;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int eventFd_ = -1;
  std::vector<uint8_t> address_;
  uint64_t memoryTypes_ = 0;
};

}  // namespace hc::transport::ucx
