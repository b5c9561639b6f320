// The C API of hetero_comm/hc.h: errors, communicator checks, memory and requests. Every entry
// point converts hc::Status into hc_status_t, records the message for hc_get_last_error, and
// never throws.
#include <unistd.h>

#include <new>
#include <string>

#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/group.h"
#include "client/src/runtime_api.h"
#include "client/src/small_ops.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

thread_local std::string tlsLastError;

hc_status_t ret(const Status& s, CommState* comm = nullptr) {
  return s.isOk() ? HC_OK : fail(s, comm);
}

}  // namespace

hc_status_t fail(const Status& s, CommState* comm) {
  tlsLastError = s.message();
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->lastError = s.message();
  }
  return static_cast<hc_status_t>(s.code());
}

namespace {

Status attachSmallArea(CommState* c, uint64_t handle) {
  auto grant = c->conn->commArea(handle);
  if (!grant.isOk()) return grant.status();
  if (grant->reply.present == 0) return okStatus();
  auto area = SmallOpArea::attach(std::move(grant->fd), grant->reply.bytes, grant->reply.rank,
                                  static_cast<int>(grant->reply.nranks));
  if (!area.isOk()) return area.status();
  c->area = std::move(*area);
  return okStatus();
}

}  // namespace

Status adoptInit(CommState* c) {
  std::lock_guard<std::mutex> lock(c->mutex);
  if (!c->initRequest) return okStatus();
  const RequestPtr& r = c->initRequest;
  if (!r->done.load(std::memory_order_acquire)) {
    return Status{Code::InProgress, "the communicator is still initializing"};
  }
  if (!r->status.isOk()) return r->status;  // kept: every later call reports the same failure
  if (r->result.value == 0) {
    return internalError("hetero-commd completed the communicator's creation without a handle");
  }
  if (r->result.nranks > 0) {  // a split names the rank and size in the new communicator
    c->rank.store(r->result.rank);
    c->nranks.store(r->result.nranks);
  }
  if (c->smallOpsAsked.load() && c->conn->daemonMinor() >= ipc::kSmallAreaMinor) {
    Status s = attachSmallArea(c, r->result.value);
    if (!s.isOk()) {
      // Unusable from now on, and every later call says why; the handle stays, so destroy and
      // abort still tell the daemon, which then fails the other ranks' waits in the area.
      c->handle.store(r->result.value);
      auto failed = std::make_shared<Request>();
      failed->status = s;
      failed->done.store(true);
      c->initRequest = std::move(failed);
      return s;
    }
  }
  c->handle.store(r->result.value);
  c->initRequest.reset();
  return okStatus();
}

Status checkUsable(CommState* c) {
  if (c->conn->ownerPid() != ::getpid()) {
    return invalidArgument("the communicator was created by the parent process; create a new "
                           "one after fork");
  }
  if (c->aborted.load()) return unavailable("the communicator was aborted");
  return adoptInit(c);
}

Result<std::shared_ptr<CommState>> usableComm(hc_comm_t comm) {
  if (comm == nullptr || !comm->state) return invalidArgument("communicator is NULL");
  HC_RETURN_IF_ERROR(checkUsable(comm->state.get()));
  return comm->state;
}

hc_status_t waitRequest(const RequestPtr& r, CommState* comm) {
  if (comm == nullptr) return fail(internalError("request without a communicator"));
  Status s =
      r->smallOp && comm->area
          ? comm->area->wait(*comm, r)
          : comm->conn->waitUntil([&] { return r->done.load(std::memory_order_acquire); }, comm);
  if (!s.isOk()) return fail(s, comm);
  return ret(r->status, comm);
}

}  // namespace hc::client

using hc::Code;
using hc::Status;
using namespace hc::client;

extern "C" {

hc_status_t hc_get_version(int* version) {
  if (version == nullptr) return fail(hc::invalidArgument("version is NULL"));
  *version = HC_VERSION_CODE;
  return HC_OK;
}

const char* hc_get_error_string(hc_status_t status) {
  switch (status) {
    case HC_OK: return "no error";
    case HC_IN_PROGRESS: return "operation in progress";
    case HC_NO_RESOURCE: return "out of resources";
    case HC_INVALID_ARGUMENT: return "invalid argument";
    case HC_NOT_FOUND: return "not found";
    case HC_PERMISSION_DENIED: return "permission denied";
    case HC_UNAVAILABLE: return "unavailable: the daemon, a peer rank or the communicator is gone";
    case HC_TIMEOUT: return "timed out";
    case HC_REMOTE_ERROR: return "remote error: another rank failed";
    case HC_DEVICE_ERROR: return "device error";
    case HC_TRANSPORT_ERROR: return "transport error";
    case HC_INTERNAL: return "internal error";
    case HC_UNSUPPORTED: return "not supported here";
    default: return "unknown status";
  }
}

const char* hc_get_last_error(hc_comm_t comm) {
  if (comm != nullptr && comm->state) {
    std::lock_guard<std::mutex> lock(comm->state->mutex);
    hc::client::tlsLastError = comm->state->lastError;
  }
  return hc::client::tlsLastError.c_str();
}

hc_status_t hc_mem_alloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(hc::invalidArgument("ptr is NULL"));
  if (size == 0) return fail(hc::invalidArgument("size is 0"));
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  auto p = (*conn)->memAlloc(size);
  if (!p.isOk()) return fail(p.status());
  *ptr = *p;
  return HC_OK;
}

hc_status_t hc_mem_free(void* ptr) {
  if (ptr == nullptr) return HC_OK;
  auto device = freeIfDeviceAllocation(ptr);
  if (!device.isOk()) return fail(device.status());
  if (*device) return HC_OK;
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  return ret((*conn)->memFree(ptr));
}

hc_status_t hc_get_memory_path(const char** description) {
  if (description == nullptr) return fail(hc::invalidArgument("description is NULL"));
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  // Fixed at connect and never freed: the characters outlive any later connection.
  *description = (*conn)->memoryPath().c_str();
  return HC_OK;
}

hc_status_t hc_test(hc_request_t* req, int* done) {
  if (req == nullptr || *req == nullptr || done == nullptr) {
    return fail(hc::invalidArgument("NULL request"));
  }
  RequestPtr r = (*req)->r;
  CommState* comm = r->comm.get();
  if (comm != nullptr && comm->area) comm->area->progress();
  if (comm != nullptr) comm->conn->reap();
  *done = r->done.load(std::memory_order_acquire) ? 1 : 0;
  if (!*done && comm != nullptr && comm->aborted.load()) *done = 1;
  if (!*done) return HC_OK;
  delete *req;
  *req = nullptr;
  if (!r->done.load()) return fail(hc::unavailable("the communicator was aborted"), comm);
  return ret(r->status, comm);
}

hc_status_t hc_wait(hc_request_t* req) {
  if (req == nullptr || *req == nullptr) return fail(hc::invalidArgument("NULL request"));
  RequestPtr r = (*req)->r;
  if (groupHolds(r.get())) {
    // It would never be submitted: this thread's hc_group_end is what submits it.
    return fail(hc::invalidArgument("hc_wait on an operation of this thread's open group; call "
                                    "hc_group_end first"),
                r->comm.get());
  }
  delete *req;
  *req = nullptr;
  return waitRequest(r, r->comm.get());
}

}  // extern "C"
