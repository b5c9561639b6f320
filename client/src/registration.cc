// hc_comm_register / hc_comm_deregister (ncclCommRegister's counterpart). A registration handle
// is a small client-side object; what registration does depends on where the buffer lives:
//   - device memory (sim, CUDA, HIP): the allocation is exported and imported by the daemon now,
//     so the buffer's first operation pays nothing, and pinned in the connection's region cache,
//     so no automatic release (least recently used, device_cache.h) drops it while registered;
//   - hc_mem_alloc memory: a handle only (the daemon maps the whole segment already);
//   - other host memory: with cross-memory attach, the range is checked to be mapped in this
//     process (the daemon would fail the operation on a hole) and recorded; without it, a handle
//     only: such memory is staged through the segment on every operation, never zero copy.
// Deregistration drops the pin. An operation still using the buffer is not disturbed: the
// client keeps the region registered until the operation's completion, and the daemon keeps its
// mapping until the operation ends, so deregistration in effect waits for it.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "client/src/comm_handles.h"
#include "client/src/comm_init.h"
#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

enum class Registered { Segment, Device, Attached, Staged };

struct Registration {
  CommState* comm = nullptr;
  Registered kind = Registered::Staged;
  const char* runtime = nullptr;  // Device: the runtime's name (static storage)
  uint64_t allocationId = 0;      // Device
};

// The live handles, so that a stale or foreign pointer is refused, never dereferenced.
struct Registrations {
  std::mutex mutex;
  std::set<Registration*> live;  // guarded by mutex
};

Registrations& registrations() {
  static Registrations* const table = new Registrations();  // outlives every caller
  return *table;
}

// Whether every byte of [p, p + bytes) lies in a readable and writable mapping of this process,
// read from /proc/self/maps (sorted by address).
Result<bool> rangeIsMapped(const void* p, uint64_t bytes) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return systemError("open /proc/self/maps", errno);
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t end = at + bytes;
  char line[512];
  while (at < end && std::fgets(line, sizeof(line), maps) != nullptr) {
    uintmax_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%jx-%jx %4s", &lo, &hi, perms) != 3) continue;
    if (at >= hi || at < lo) continue;
    if (perms[0] != 'r' || perms[1] != 'w') break;
    at = static_cast<uintptr_t>(hi);
  }
  std::fclose(maps);
  return at >= end;
}

Result<Registration> registrationOf(Connection& conn, CommState* comm, void* buff, size_t size) {
  Registration r;
  r.comm = comm;
  auto in = conn.inSegment(buff, size);
  if (!in.isOk()) return Status{in.status().code(), "buffer " + in.status().message()};
  if (*in) {
    r.kind = Registered::Segment;
    return r;
  }
  for (DeviceRuntime* rt : deviceRuntimes()) {
    DevicePointer at;
    if (!rt->lookup(buff, &at)) continue;
    const uint64_t offset = reinterpret_cast<uintptr_t>(buff) - at.base;
    if (size > at.bytes - offset) {
      return invalidArgument("[" + std::to_string(size) + " bytes at offset " +
                             std::to_string(offset) + ") overruns its " + rt->name() +
                             " allocation of " + std::to_string(at.bytes) + " bytes");
    }
    HC_RETURN_IF_ERROR(conn.pinDevice(rt, at));
    r.kind = Registered::Device;
    r.runtime = rt->name();
    r.allocationId = at.allocationId;
    return r;
  }
  if (!conn.crossMemoryAttach()) return r;  // staged: nothing to do ahead of an operation
  auto mapped = rangeIsMapped(buff, size);
  if (!mapped.isOk()) return mapped.status();
  if (!*mapped) {
    char text[160];
    std::snprintf(text, sizeof(text), "[%p, +%zu bytes) is not all mapped readable and writable",
                  buff, size);
    return invalidArgument(text);
  }
  r.kind = Registered::Attached;
  return r;
}

}  // namespace
}  // namespace hc::client

using hc::client::fail;

extern "C" {

hc_status_t hc_comm_register(hc_comm_t comm, void* buff, size_t size, void** handle) {
  using namespace hc::client;
  if (handle == nullptr) return fail(hc::invalidArgument("hc_comm_register: handle is NULL"));
  *handle = nullptr;
  CommPin pin(comm);  // a destroy or abort from another thread never frees it under this call
  if (!pin.status().isOk()) return failOn(pin);
  auto c = usableComm(comm);
  if (!c.isOk()) return fail(c.status(), pin.state());
  CommState* state = c->get();
  if (buff == nullptr || size == 0) {
    return fail(hc::invalidArgument("hc_comm_register: needs a buffer and a size > 0"), state);
  }
  auto r = registrationOf(*state->conn, state, buff, size);
  if (!r.isOk()) {
    return fail(hc::Status{r.status().code(), "hc_comm_register: " + r.status().message()}, state);
  }
  auto* owned = new (std::nothrow) Registration(*r);
  if (owned == nullptr) {
    if (r->kind == Registered::Device) state->conn->unpinDevice(r->runtime, r->allocationId);
    return fail(hc::Status{hc::Code::NoResource, "out of memory"}, state);
  }
  Registrations& table = registrations();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.live.insert(owned);
  *handle = owned;
  return HC_OK;
}

hc_status_t hc_comm_deregister(hc_comm_t comm, void* handle) {
  using namespace hc::client;
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  CommState* state = pin.state();
  auto* r = static_cast<Registration*>(handle);
  {
    Registrations& table = registrations();
    std::lock_guard<std::mutex> lock(table.mutex);
    auto it = table.live.find(r);
    if (it == table.live.end() || r->comm != state) {
      return fail(hc::invalidArgument("hc_comm_deregister: not a registration handle of this "
                                      "communicator (or deregistered already)"),
                  state);
    }
    table.live.erase(it);
  }
  if (r->kind == Registered::Device) state->conn->unpinDevice(r->runtime, r->allocationId);
  delete r;
  return HC_OK;
}

}  // extern "C"
