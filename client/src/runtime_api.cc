// The C API's calls that act through the caller's own GPU runtime: NCCL's stream rule for a
// communicator (hc_comm_order_on_streams; comm_state.h streamRuntime, applied per operation by
// chooseStream in submit.cc) and device memory (hc_mem_alloc_device, freed by hc_mem_free).
#include "client/src/runtime_api.h"

#include <map>
#include <mutex>
#include <string>

#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/device_runtime.h"

namespace hc::client {
namespace {

// What hc_mem_alloc_device handed out, so hc_mem_free knows which runtime frees a pointer
// without asking a runtime about a pointer that is not its own.
struct DeviceAllocations {
  std::mutex mutex;
  std::map<void*, DeviceRuntime*> byPointer;  // guarded by mutex
};

DeviceAllocations& deviceAllocations() {
  static DeviceAllocations* const table = new DeviceAllocations();  // outlives every caller
  return *table;
}

// The runtime hc_runtime_t names, or an error that says why it is not here.
Result<DeviceRuntime*> runtimeOf(hc_runtime_t runtime, const char* call) {
  DeviceRuntime* rt = nullptr;
  if (runtime == HC_RUNTIME_CUDA) {
    rt = cudaRuntime();
  } else if (runtime == HC_RUNTIME_HIP) {
    rt = hipRuntime();
  } else {
    return invalidArgument(std::string(call) + ": runtime " +
                           std::to_string(static_cast<int>(runtime)) + " is not an hc_runtime_t");
  }
  if (rt == nullptr) {
    return Status{Code::NotFound, std::string(call) + ": no " +
                                      (runtime == HC_RUNTIME_CUDA ? "CUDA driver (libcuda.so.1)"
                                                                  : "HIP runtime (libamdhip64)") +
                                      " is loaded in this process"};
  }
  return rt;
}

}  // namespace

Result<bool> freeIfDeviceAllocation(void* ptr) {
  DeviceAllocations& table = deviceAllocations();
  DeviceRuntime* rt = nullptr;
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    auto it = table.byPointer.find(ptr);
    if (it == table.byPointer.end()) return false;
    rt = it->second;
    table.byPointer.erase(it);
  }
  // The daemon's import goes first (now, or once operations still using it completed), so
  // nothing keeps the memory alive in the driver after the free.
  DevicePointer at;
  Connection* conn = Connection::current();
  if (conn != nullptr && rt->lookup(ptr, &at))
    conn->forgetDeviceAllocation(rt->name(), at.allocationId);
  HC_RETURN_IF_ERROR(rt->freeDevice(ptr));
  return true;
}

}  // namespace hc::client

using hc::Code;
using hc::client::fail;

extern "C" {

hc_status_t hc_comm_order_on_streams(hc_comm_t comm, hc_runtime_t runtime) {
  auto c = hc::client::usableComm(comm);
  // A communicator still initializing is usable here: the rule is the client's alone.
  if (!c.isOk() && c.status().code() != Code::InProgress) {
    return fail(c.status(), comm != nullptr ? comm->state.get() : nullptr);
  }
  auto rt = hc::client::runtimeOf(runtime, "hc_comm_order_on_streams");
  if (!rt.isOk()) return fail(rt.status(), comm->state.get());
  comm->state->streamRuntime.store(*rt);
  return HC_OK;
}

hc_status_t hc_mem_alloc_device(void** ptr, size_t size, hc_runtime_t runtime) {
  if (ptr == nullptr) return fail(hc::invalidArgument("hc_mem_alloc_device: ptr is NULL"));
  *ptr = nullptr;
  if (size == 0) return fail(hc::invalidArgument("hc_mem_alloc_device: size is 0"));
  auto rt = hc::client::runtimeOf(runtime, "hc_mem_alloc_device");
  if (!rt.isOk()) return fail(rt.status());
  auto p = (*rt)->allocateDevice(size);
  if (!p.isOk()) return fail(p.status());
  hc::client::DeviceAllocations& table = hc::client::deviceAllocations();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.byPointer[*p] = *rt;
  *ptr = *p;
  return HC_OK;
}

}  // extern "C"
