// The C API of hetero_comm/hc.h over Connection. Every entry point converts hc::Status into
// hc_status_t, records the message for hc_get_last_error, and never throws.
#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <string>

#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

constexpr uint32_t kIdMagic = 0x44494348;  // "HCID"
constexpr uint32_t kIdVersion = 1;

// Layout of the 128-byte unique id; the rest is reserved for the root daemon's peer address.
struct UniqueIdLayout {
  uint32_t magic;
  uint32_t version;
  uint8_t key[16];
};

thread_local std::string tlsLastError;

hc_status_t ret(const Status& s, CommState* comm = nullptr) {
  return s.isOk() ? HC_OK : fail(s, comm);
}

// The communicator's state, checked to be usable from this process.
Result<CommState*> usable(hc_comm_t comm) {
  if (comm == nullptr || !comm->state) return invalidArgument("communicator is NULL");
  CommState* c = comm->state.get();
  if (c->conn->ownerPid() != ::getpid()) {
    return invalidArgument("the communicator was created by the parent process; create a new "
                           "one after fork");
  }
  if (c->aborted.load()) return unavailable("the communicator was aborted");
  if (c->initRequest && !c->initRequest->done.load()) {
    return Status{Code::InProgress, "the communicator is still initializing"};
  }
  return c;
}

hc_status_t waitRequest(const RequestPtr& r, CommState* comm) {
  if (comm == nullptr) return fail(internalError("request without a communicator"));
  Status s = comm->conn->waitUntil([&] { return r->done.load(std::memory_order_acquire); }, comm);
  if (!s.isOk()) return fail(s, comm);
  return ret(r->status, comm);
}

Status initComm(CommState* c, int nranks, const hc_unique_id_t& id, int rank, int timeoutMs) {
  UniqueIdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  if (layout.magic != kIdMagic || layout.version != kIdVersion) {
    return invalidArgument("the unique id was not made by hc_get_unique_id");
  }
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    return invalidArgument("rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                           " is out of range");
  }
  ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(ipc::OpType::CommInit);
  e.root = -1;
  std::memcpy(e.key, layout.key, sizeof(e.key));
  e.nranks = nranks;
  e.rank = rank;
  e.timeoutMs = timeoutMs;
  auto r = c->conn->submit(e, nullptr, true);
  if (!r.isOk()) return r.status();
  c->initRequest = *r;
  return okStatus();
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

hc_status_t submitOp(hc_comm_t comm, ipc::SubmitEntry e, const void* send, uint64_t sendBytes,
                     const void* recv, uint64_t recvBytes, int op, hc_request_t* req) {
  auto c = usable(comm);
  if (!c.isOk()) return fail(c.status(), comm != nullptr ? comm->state.get() : nullptr);
  CommState* st = *c;
  if (op >= 0 && op < HC_NUM_OPS) {
    e.redop = static_cast<uint8_t>(op);
  } else {
    std::lock_guard<std::mutex> lock(st->mutex);
    auto it = st->premulOps.find(op);
    if (it == st->premulOps.end()) {
      return fail(invalidArgument("unknown reduction operator " + std::to_string(op)));
    }
    e.redop = static_cast<uint8_t>(ipc::RedOp::PreMulSum);
    e.scalar = it->second.second;
  }
  auto s = st->conn->bufferRef(send, sendBytes);
  if (!s.isOk()) return fail(s.status(), st);
  auto r = st->conn->bufferRef(recv, recvBytes);
  if (!r.isOk()) return fail(r.status(), st);
  e.send = *s;
  e.recv = *r;
  e.commHandle = st->handle;
  auto sub = st->conn->submit(e, comm->state, req != nullptr);
  if (!sub.isOk()) return fail(sub.status(), st);
  if (req != nullptr) {
    *req = new (std::nothrow) hc_request{*sub};
    if (*req == nullptr) return fail(Status{Code::NoResource, "out of memory"}, st);
  }
  return HC_OK;
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
    default: return "unknown status";
  }
}

const char* hc_get_last_error(hc_comm_t comm) {
  if (comm != nullptr && comm->state) {
    std::lock_guard<std::mutex> lock(comm->state->mutex);
    tlsLastError = comm->state->lastError;
  }
  return tlsLastError.c_str();
}

hc_status_t hc_get_unique_id(hc_unique_id_t* id) {
  if (id == nullptr) return fail(hc::invalidArgument("id is NULL"));
  std::memset(id, 0, sizeof(*id));
  UniqueIdLayout layout{kIdMagic, kIdVersion, {}};
  if (::getrandom(layout.key, sizeof(layout.key), 0) != sizeof(layout.key)) {
    return fail(hc::systemError("getrandom", errno));
  }
  std::memcpy(id->internal, &layout, sizeof(layout));
  return HC_OK;
}

hc_status_t hc_comm_init_rank_config(hc_comm_t* comm, int nranks, hc_unique_id_t id, int rank,
                                     hc_config_t* config) {
  if (comm == nullptr) return fail(hc::invalidArgument("comm is NULL"));
  *comm = nullptr;
  bool blocking = true;
  int timeoutMs = 0;
  if (config != nullptr) {
    if (config->magic != HC_API_MAGIC || config->size < offsetof(hc_config_t, comm_name)) {
      return fail(hc::invalidArgument("config was not initialized with HC_CONFIG_INITIALIZER"));
    }
    if (config->blocking != HC_CONFIG_UNDEF_INT) blocking = config->blocking != 0;
    if (config->timeout_ms != HC_CONFIG_UNDEF_INT) timeoutMs = config->timeout_ms;
  }
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  auto state = std::make_shared<CommState>();
  state->conn = *conn;
  state->rank = rank;
  state->nranks = nranks;
  Status s = initComm(state.get(), nranks, id, rank, timeoutMs);
  if (!s.isOk()) return fail(s);
  auto* handle = new (std::nothrow) hc_comm{state};
  if (handle == nullptr) return fail(Status{Code::NoResource, "out of memory"});
  *comm = handle;
  if (!blocking) return HC_IN_PROGRESS;
  hc_status_t rc = waitRequest(state->initRequest, state.get());
  if (rc != HC_OK) {
    delete handle;
    *comm = nullptr;
    return rc;
  }
  state->handle = state->initRequest->value;
  state->initRequest.reset();
  return HC_OK;
}

hc_status_t hc_comm_init_rank(hc_comm_t* comm, int nranks, hc_unique_id_t id, int rank) {
  return hc_comm_init_rank_config(comm, nranks, id, rank, nullptr);
}

hc_status_t hc_comm_get_async_error(hc_comm_t comm, hc_status_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return fail(hc::invalidArgument("NULL argument"));
  CommState* c = comm->state.get();
  c->conn->reap();
  if (c->initRequest) {
    if (!c->initRequest->done.load(std::memory_order_acquire)) {
      if (c->conn->dead()) {
        *asyncError = HC_UNAVAILABLE;
        return HC_OK;
      }
      *asyncError = HC_IN_PROGRESS;
      return HC_OK;
    }
    if (!c->initRequest->status.isOk()) {
      *asyncError = static_cast<hc_status_t>(fail(c->initRequest->status, c));
      return HC_OK;
    }
    c->handle = c->initRequest->value;
    c->initRequest.reset();
  }
  if (c->aborted.load()) {
    *asyncError = HC_UNAVAILABLE;
    return HC_OK;
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  *asyncError = static_cast<hc_status_t>(c->asyncError.code());
  return HC_OK;
}

hc_status_t hc_comm_finalize(hc_comm_t comm) {
  auto c = usable(comm);
  if (!c.isOk()) return fail(c.status(), comm != nullptr ? comm->state.get() : nullptr);
  CommState* st = *c;
  Status s = st->conn->waitUntil([st] { return st->outstanding.load() == 0; }, st);
  if (!s.isOk()) return fail(s, st);
  std::lock_guard<std::mutex> lock(st->mutex);
  if (!st->asyncError.isOk()) {
    st->lastError = st->asyncError.message();
    tlsLastError = st->lastError;
  }
  return static_cast<hc_status_t>(st->asyncError.code());
}

hc_status_t hc_comm_destroy(hc_comm_t comm) {
  if (comm == nullptr) return HC_OK;
  CommState* st = comm->state.get();
  hc_status_t rc = HC_OK;
  if (st->conn->ownerPid() == ::getpid() && !st->aborted.load() && !st->conn->dead() &&
      st->handle != 0) {
    Status s = st->conn->waitUntil([st] { return st->outstanding.load() == 0; }, st);
    hc::ipc::SubmitEntry e{};
    e.op = static_cast<uint8_t>(hc::ipc::OpType::CommDestroy);
    e.commHandle = st->handle;
    auto r = s.isOk() ? st->conn->submit(e, nullptr, true) : hc::Result<RequestPtr>(s);
    if (r.isOk()) {
      auto req = *r;
      s = st->conn->waitUntil([&] { return req->done.load(); }, nullptr);
      if (s.isOk()) s = req->status;
    } else {
      s = r.status();
    }
    rc = ret(s);
  }
  delete comm;
  return rc;
}

hc_status_t hc_comm_abort(hc_comm_t comm) {
  if (comm == nullptr) return HC_OK;
  CommState* st = comm->state.get();
  if (st->conn->ownerPid() == ::getpid()) st->conn->abort(st, st->handle);
  delete comm;
  return HC_OK;
}

hc_status_t hc_comm_count(hc_comm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(hc::invalidArgument("NULL argument"));
  *count = comm->state->nranks;
  return HC_OK;
}

hc_status_t hc_comm_user_rank(hc_comm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(hc::invalidArgument("NULL argument"));
  *rank = comm->state->rank;
  return HC_OK;
}

hc_status_t hc_comm_device(hc_comm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return fail(hc::invalidArgument("NULL argument"));
  *device = -1;  // host memory
  return HC_OK;
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
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  return ret((*conn)->memFree(ptr));
}

hc_status_t hc_test(hc_request_t* req, int* done) {
  if (req == nullptr || *req == nullptr || done == nullptr) {
    return fail(hc::invalidArgument("NULL request"));
  }
  RequestPtr r = (*req)->r;
  CommState* comm = r->comm.get();
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
  delete *req;
  *req = nullptr;
  return waitRequest(r, r->comm.get());
}

}  // extern "C"
