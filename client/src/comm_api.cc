// Communicator lifecycle of hetero_comm/hc.h: unique ids, init, split, finalize, destroy, abort
// and the queries. Each call on an existing handle pins it first (comm_handles.h), so a destroy or
// abort from another thread never frees it under the call.
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "client/src/comm_handles.h"
#include "client/src/comm_init.h"
#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/group.h"
#include "client/src/small_ops.h"
#include "client/src/submit.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

constexpr uint32_t kIdMagic = 0x44494348;  // "HCID"
constexpr uint32_t kIdVersion = 1;

// Layout of the 128-byte unique id (daemon/peer/unique_id.h reads the same bytes): magic,
// version, the random communicator key, then the root daemon's Peer address as a length byte
// and up to kMaxRootAddress characters; length 0 names no root (a one-daemon job).
struct UniqueIdLayout {
  uint32_t magic;
  uint32_t version;
  uint8_t key[16];
  uint8_t rootLength;
  char root[103];
};
static_assert(sizeof(UniqueIdLayout) == sizeof(hc_unique_id_t::internal));
constexpr size_t kMaxRootAddress = sizeof(UniqueIdLayout::root);

}  // namespace

Result<CommConfig> readConfig(const hc_config_t* config) {
  CommConfig c;
  if (config == nullptr) return c;
  if (config->magic != HC_API_MAGIC || config->size < offsetof(hc_config_t, comm_name)) {
    return invalidArgument("config was not initialized with HC_CONFIG_INITIALIZER");
  }
  if (config->blocking != HC_CONFIG_UNDEF_INT) c.blocking = config->blocking != 0;
  if (config->timeout_ms != HC_CONFIG_UNDEF_INT) c.timeoutMs = config->timeout_ms;
  // A config of an older header ends before the field.
  if (config->size >= offsetof(hc_config_t, host_small_ops) + sizeof(int) &&
      config->host_small_ops != HC_CONFIG_UNDEF_INT) {
    c.hostSmallOps = config->host_small_ops != 0;
  }
  return c;
}

Result<hc_unique_id_t> newUniqueId(Connection& conn, bool nameRoot) {
  UniqueIdLayout layout{};
  layout.magic = kIdMagic;
  layout.version = kIdVersion;
  if (::getrandom(layout.key, sizeof(layout.key), 0) != sizeof(layout.key)) {
    return systemError("getrandom", errno);
  }
  if (nameRoot) {
    auto root = conn.peerAddress();
    if (!root.isOk()) return root.status();
    if (root->size() > kMaxRootAddress) {
      return invalidArgument("the daemon's Peer address is longer than a unique id holds");
    }
    layout.rootLength = static_cast<uint8_t>(root->size());
    std::memcpy(layout.root, root->data(), root->size());
  }
  hc_unique_id_t id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, &layout, sizeof(layout));
  return id;
}

Result<RequestPtr> submitInit(Connection& conn, int nranks, const hc_unique_id_t& id, int rank,
                              int timeoutMs, bool smallOps) {
  UniqueIdLayout layout;
  std::memcpy(&layout, id.internal, sizeof(layout));
  if (layout.magic != kIdMagic || layout.version != kIdVersion ||
      layout.rootLength > kMaxRootAddress) {
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
  if (smallOps && conn.daemonMinor() >= ipc::kSmallAreaMinor) e.flags |= ipc::kEntrySmallOps;
  if (layout.rootLength > 0) {
    HC_RETURN_IF_ERROR(conn.nameCommRoot(e.key, std::string(layout.root, layout.rootLength)));
  }
  return submitControl(conn, e, nullptr);
}

hc_status_t failOn(const CommPin& pin) {
  return fail(pin.status(), pin.pinned() ? pin.state() : nullptr);
}

hc_status_t completeCreation(hc_comm_t handle, const RequestPtr& r, bool blocking,
                             CommState* waitComm, hc_comm_t* out) {
  CommState* state = handle->state.get();
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->initRequest = r;
  }
  *out = handle;
  if (!blocking) return HC_IN_PROGRESS;
  hc_status_t rc = waitRequest(r, waitComm);
  Status s = rc == HC_OK ? adoptInit(state) : okStatus();
  if (rc == HC_OK && !s.isOk()) rc = fail(s, waitComm);
  if (rc != HC_OK) {
    discardCommHandle(handle);
    *out = nullptr;
  }
  return rc;
}

}  // namespace hc::client

using hc::Code;
using hc::Status;
using namespace hc::client;

extern "C" {

hc_status_t hc_get_unique_id(hc_unique_id_t* id) {
  if (id == nullptr) return fail(hc::invalidArgument("id is NULL"));
  std::memset(id, 0, sizeof(*id));
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  // The id names this daemon as the root when it serves multi-node jobs (it has a Peer listener).
  auto made = newUniqueId(**conn, /*nameRoot=*/true);
  if (!made.isOk()) return fail(made.status());
  *id = *made;
  return HC_OK;
}

hc_status_t hc_comm_init_rank_config(hc_comm_t* comm, int nranks, hc_unique_id_t id, int rank,
                                     hc_config_t* config) {
  if (comm == nullptr) return fail(hc::invalidArgument("comm is NULL"));
  *comm = nullptr;
  auto cfg = readConfig(config);
  if (!cfg.isOk()) return fail(cfg.status());
  auto conn = Connection::get();
  if (!conn.isOk()) return fail(conn.status());
  auto state = std::make_shared<CommState>();
  state->conn = *conn;
  state->rank.store(rank);
  state->nranks.store(nranks);
  hc_comm* handle = newCommHandle(state);
  if (handle == nullptr) return fail(Status{Code::NoResource, "out of memory"});
  state->smallOpsAsked.store(cfg->hostSmallOps);
  auto r = submitInit(**conn, nranks, id, rank, cfg->timeoutMs, cfg->hostSmallOps);
  if (!r.isOk()) {
    discardCommHandle(handle);
    return fail(r.status());
  }
  return completeCreation(handle, *r, cfg->blocking, state.get(), comm);
}

hc_status_t hc_comm_init_rank(hc_comm_t* comm, int nranks, hc_unique_id_t id, int rank) {
  return hc_comm_init_rank_config(comm, nranks, id, rank, nullptr);
}

hc_status_t hc_comm_split(hc_comm_t comm, int color, int key, hc_comm_t* newcomm,
                          hc_config_t* config) {
  if (newcomm == nullptr) return fail(hc::invalidArgument("newcomm is NULL"));
  *newcomm = nullptr;
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  auto c = usableComm(comm);
  if (!c.isOk()) return fail(c.status(), pin.state());
  const std::shared_ptr<CommState>& parent = *c;
  if (parent->revoked.load() && !groupOpen())
    return splitRevoked(comm, color, key, newcomm, config);
  Status s;
  if (color < 0 && color != HC_SPLIT_NOCOLOR) {
    s = hc::invalidArgument("hc_comm_split: color " + std::to_string(color) +
                            " must be >= 0 or HC_SPLIT_NOCOLOR");
  } else if (groupOpen()) {
    // It would overtake the group's operations on the parent, which other ranks run first.
    s = hc::invalidArgument(
        "hc_comm_split inside a group is not supported; call it after "
        "hc_group_end");
  } else if (parent->conn->daemonMinor() < 1) {
    s = hc::invalidArgument("hc_comm_split needs protocol 1.1; this hetero-commd speaks 1." +
                            std::to_string(parent->conn->daemonMinor()) + ": update the daemon");
  }
  auto cfg = readConfig(config);
  if (s.isOk() && !cfg.isOk()) s = cfg.status();
  if (!s.isOk()) return fail(s, parent.get());

  hc::ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(hc::ipc::OpType::CommSplit);
  e.commHandle = parent->handle.load();
  e.root = -1;
  e.splitColor = color;
  e.splitKey = key;
  hc_comm* handle = nullptr;
  if (color != HC_SPLIT_NOCOLOR) {
    auto state = std::make_shared<CommState>();
    state->conn = parent->conn;  // one connection per process, shared like init's
    state->streamRuntime.store(parent->streamRuntime.load());
    state->device.store(parent->device.load());  // the new rank's buffers stay where they were
    state->smallOpsAsked.store(parent->smallOpsAsked.load());  // the daemon decides per parent
    handle = newCommHandle(state);
    if (handle == nullptr) return fail(Status{Code::NoResource, "out of memory"}, parent.get());
  }
  // A request of the parent: the parent's abort fails it and its finalize waits for it. With no
  // color and no blocking, nobody waits for it: a failure becomes the parent's async error.
  const bool tracked = handle != nullptr || cfg->blocking;
  auto r = submitControl(*parent->conn, e, parent, tracked);
  if (!r.isOk()) {
    discardCommHandle(handle);
    return fail(r.status(), parent.get());
  }
  if (handle == nullptr) {
    // No color: no communicator, but the split is collective: block to report its outcome.
    return cfg->blocking ? waitRequest(*r, parent.get()) : HC_OK;
  }
  return completeCreation(handle, *r, cfg->blocking, parent.get(), newcomm);
}

hc_status_t hc_comm_get_async_error(hc_comm_t comm, hc_status_t* asyncError) {
  if (asyncError == nullptr) return fail(hc::invalidArgument("NULL argument"));
  CommPin pin(comm);
  // A watchdog may poll while another thread aborts: an aborted handle reports its state.
  if (pin.endedAs() == HandleEnd::Aborted) {
    *asyncError = HC_UNAVAILABLE;
    return HC_OK;
  }
  if (!pin.status().isOk()) return failOn(pin);
  CommState* c = pin.state();
  // Also notices a daemon that died while nothing was outstanding, which no completion reports.
  c->conn->pollThrottled();
  Status init = adoptInit(c);
  if (init.code() == Code::InProgress) {
    *asyncError = c->conn->dead() ? HC_UNAVAILABLE : HC_IN_PROGRESS;
    return HC_OK;
  }
  if (!init.isOk()) {
    *asyncError = fail(init, c);
    return HC_OK;
  }
  if (c->aborted.load()) {
    *asyncError = HC_UNAVAILABLE;
    return HC_OK;
  }
  // Small ops issued without a request move only when someone looks: finished, handed to the
  // daemon, or failed with the area (a failure becomes the communicator's asynchronous error).
  if (c->area) c->area->progress();
  if (c->conn->dead()) {
    c->setAsyncError(hc::unavailable("hetero-commd is gone: the connection to it closed"));
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  *asyncError = static_cast<hc_status_t>(c->asyncError.code());
  if (!c->asyncError.isOk()) {
    // A watchdog that finds the error asks hc_get_last_error what it was, as NCCL's callers ask
    // ncclGetLastError.
    c->lastError = c->asyncError.message();
    (void)fail(c->asyncError);  // the thread's last error too
  }
  return HC_OK;
}

hc_status_t hc_comm_finalize(hc_comm_t comm) {
  // Pinned for the whole wait: an abort from another thread wakes it and never frees under it.
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  auto c = usableComm(comm);
  if (!c.isOk()) return fail(c.status(), pin.state());
  CommState* st = c->get();
  if (st->revoked.load()) {
    // NCCL's rule: a revoked communicator's operations never finish; it is destroyed or aborted.
    return fail(Status{Code::Unsupported,
                       "hc_comm_finalize after hc_comm_revoke: destroy or abort the communicator"},
                st);
  }
  if (groupTouches(st)) {
    return fail(hc::invalidArgument("hc_comm_finalize inside a group that holds operations of "
                                    "this communicator; call hc_group_end first"),
                st);
  }
  Status s = st->conn->waitUntil([st] { return st->outstanding.load() == 0; }, st);
  if (!s.isOk()) return fail(s, st);
  std::lock_guard<std::mutex> lock(st->mutex);
  if (!st->asyncError.isOk()) {
    st->lastError = st->asyncError.message();
    (void)fail(st->asyncError);  // the thread's last error too
  }
  return static_cast<hc_status_t>(st->asyncError.code());
}

hc_status_t hc_comm_destroy(hc_comm_t comm) {
  if (comm == nullptr) return HC_OK;
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  CommState* st = pin.state();
  if (groupTouches(st)) {
    return fail(hc::invalidArgument("hc_comm_destroy inside a group that holds operations of "
                                    "this communicator; call hc_group_end first"),
                st);
  }
  const bool ours = st->conn->ownerPid() == ::getpid();
  Status s;
  if (ours) (void)adoptInit(st);  // a finished non-blocking init names the handle to destroy
  if (ours && !st->aborted.load() && !st->conn->dead() && st->handle.load() != 0) {
    s = st->conn->waitUntil([st] { return st->outstanding.load() == 0; }, st);
    hc::ipc::SubmitEntry e{};
    e.op = static_cast<uint8_t>(hc::ipc::OpType::CommDestroy);
    e.commHandle = st->handle.load();
    auto r = s.isOk() ? submitControl(*st->conn, e, nullptr) : hc::Result<RequestPtr>(s);
    if (r.isOk()) {
      RequestPtr req = *r;
      s = st->conn->waitUntil([&] { return req->done.load(); }, nullptr);
      if (s.isOk()) s = req->status;
    } else {
      s = r.status();
    }
  }
  if (ours) st->conn->staging().trim();
  // An abort from another thread meanwhile ended it first; it stays aborted.
  (void)pin.end(HandleEnd::Destroyed);
  return s.isOk() ? HC_OK : fail(s);
}

hc_status_t hc_comm_abort(hc_comm_t comm) {
  if (comm == nullptr) return HC_OK;
  CommPin pin(comm);
  if (pin.endedAs() == HandleEnd::Aborted) return HC_OK;  // a watchdog and its owner may both abort
  if (!pin.status().isOk()) return failOn(pin);
  CommState* st = pin.state();
  if (st->conn->ownerPid() == ::getpid()) {
    (void)adoptInit(st);  // a finished non-blocking init names the handle to abort
    st->conn->abort(st, st->handle.load());
    st->conn->staging().trim();
  }
  // Calls still pinning the handle keep it (they wake as aborted); it is freed after them.
  (void)pin.end(HandleEnd::Aborted);
  return HC_OK;
}

hc_status_t hc_comm_count(hc_comm_t comm, int* count) {
  if (count == nullptr) return fail(hc::invalidArgument("NULL argument"));
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  *count = pin.state()->nranks.load();
  return HC_OK;
}

hc_status_t hc_comm_user_rank(hc_comm_t comm, int* rank) {
  if (rank == nullptr) return fail(hc::invalidArgument("NULL argument"));
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  *rank = pin.state()->rank.load();
  return HC_OK;
}

hc_status_t hc_comm_device(hc_comm_t comm, int* device) {
  if (device == nullptr) return fail(hc::invalidArgument("NULL argument"));
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  *device = pin.state()->device.load();
  return HC_OK;
}

}  // extern "C"
