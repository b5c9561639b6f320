// The simulated device as this process's runtime (hetero_comm/hc_sim.h): allocations are sealed
// memfds (common/simdev), exported by passing the fd; streams are simdev worker threads. Always
// present, so tests and GPU-less machines exercise every line of the device path.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>

#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/device_runtime.h"
#include "common/simdev/sim_allocation.h"
#include "common/simdev/sim_pci.h"
#include "common/simdev/sim_stream.h"
#include "hetero_comm/hc_sim.h"

namespace hc::client {
namespace {

struct SimBlock {
  simdev::SimAllocation memory;
  uint8_t vendor;
  int32_t device;
  uint64_t id;
};

struct SimStreamHandle {
  simdev::SimStream stream;
};

class SimRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "sim"; }

  bool lookup(const void* ptr, DevicePointer* out) override {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return false;
    --it;
    const SimBlock& b = *it->second;
    if (p >= it->first + b.memory.bytes()) return false;
    DevicePointer found;
    found.memoryType = static_cast<uint8_t>(ipc::DeviceMemory::Sim);
    found.vendor = b.vendor;
    found.device = b.device;
    found.allocationId = b.id;
    found.base = it->first;
    found.bytes = b.memory.bytes();
    // Sim devices are on no bus: the synthetic address the daemon's registry computes too.
    if (auto address = simdev::simPciAddress(b.vendor, b.device)) {
      found.hasPciAddress = true;
      found.pciAddress = *address;
    }
    *out = found;
    return true;
  }

  Result<ExportedAllocation> exportAllocation(const DevicePointer& p) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(p.base);
    if (it == blocks_.end() || it->second->id != p.allocationId) {
      return notFound("sim allocation " + std::to_string(p.allocationId) + " was freed");
    }
    ExportedAllocation e;
    e.handleKind = static_cast<uint32_t>(ipc::HandleKind::Fd);
    e.fd = ::fcntl(it->second->memory.fd(), F_DUPFD_CLOEXEC, 0);
    if (e.fd < 0) return systemError("dup of a sim allocation's fd", errno);
    return e;
  }

  bool ownsStream(void* stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return streams_.count(static_cast<SimStreamHandle*>(stream)) != 0;
  }

  Status launchHostFunc(void* stream, HostFn fn, void* arg) override {
    static_cast<SimStreamHandle*>(stream)->stream.hostFunc([fn, arg] { fn(arg); });
    return okStatus();
  }

  Status waitValue32(void* stream, std::atomic<uint32_t>* word, uint32_t value) override {
    // Each slice of the wait takes completions and notices a dead daemon, which sets the flag
    // (finishRequest): the stream never waits on a party that is gone.
    static_cast<SimStreamHandle*>(stream)->stream.waitValue32(word, value, [] {
      if (Connection* c = Connection::current()) c->poll();
      return false;
    });
    return okStatus();
  }

  Status registerHostMemory(void*, size_t) override { return okStatus(); }  // host-mapped already

  Status synchronize(void* stream) override {
    return static_cast<SimStreamHandle*>(stream)->stream.synchronize();
  }

  // The C API's half.
  Result<void*> allocate(size_t bytes, uint8_t vendor, int device) {
    auto memory = simdev::SimAllocation::create(bytes, "hetero-comm-sim");
    if (!memory.isOk()) return memory.status();
    auto block = std::make_unique<SimBlock>(
        SimBlock{std::move(memory.value()), vendor, device, nextId_.fetch_add(1)});
    void* p = block->memory.data();
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = std::move(block);
    return p;
  }

  Result<uint64_t> release(void* ptr) {
    std::unique_ptr<SimBlock> block;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it == blocks_.end()) return invalidArgument("not the start of a sim allocation");
      block = std::move(it->second);
      blocks_.erase(it);
    }
    return block->id;
  }

  SimStreamHandle* createStream() {
    auto* s = new (std::nothrow) SimStreamHandle();
    if (s == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.insert(s);
    return s;
  }

  bool destroyStream(SimStreamHandle* s) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (streams_.erase(s) == 0) return false;
    }
    delete s;  // runs what is queued, then joins
    return true;
  }

 private:
  std::mutex mutex_;
  std::map<uintptr_t, std::unique_ptr<SimBlock>> blocks_;  // by base address
  std::set<SimStreamHandle*> streams_;
  std::atomic<uint64_t> nextId_{1};
};

SimRuntime& sim() {
  static SimRuntime* runtime = new SimRuntime();  // never destroyed: streams may outlive exit
  return *runtime;
}

bool validVendor(hc_sim_vendor_t v) { return v == HC_SIM_NVIDIA || v == HC_SIM_AMD; }

}  // namespace

DeviceRuntime* simRuntime() { return &sim(); }

}  // namespace hc::client

using hc::client::fail;
using hc::client::sim;
using hc::client::validVendor;

extern "C" {

hc_status_t hc_sim_malloc(void** ptr, size_t bytes, hc_sim_vendor_t vendor, int device) {
  if (ptr == nullptr || bytes == 0 || !validVendor(vendor) || device < 0) {
    return fail(hc::invalidArgument("hc_sim_malloc: needs a pointer, bytes > 0, a vendor "
                                    "(HC_SIM_NVIDIA or HC_SIM_AMD) and a device >= 0"));
  }
  auto p = sim().allocate(bytes, static_cast<uint8_t>(vendor), device);
  if (!p.isOk()) return fail(p.status());
  *ptr = *p;
  return HC_OK;
}

hc_status_t hc_sim_free(void* ptr) {
  if (ptr == nullptr) return HC_OK;
  auto id = sim().release(ptr);
  if (!id.isOk()) return fail(hc::invalidArgument("hc_sim_free: " + id.status().message()));
  if (auto* c = hc::client::Connection::current()) c->forgetDeviceAllocation("sim", *id);
  return HC_OK;
}

hc_status_t hc_sim_stream_create(hc_stream_t* stream, hc_sim_vendor_t vendor, int device) {
  if (stream == nullptr || !validVendor(vendor) || device < 0) {
    return fail(hc::invalidArgument("hc_sim_stream_create: needs a stream, a vendor and a device"));
  }
  auto* s = sim().createStream();
  if (s == nullptr) return fail(hc::Status{hc::Code::NoResource, "out of memory"});
  *stream = s;
  return HC_OK;
}

hc_status_t hc_sim_stream_destroy(hc_stream_t stream) {
  if (!sim().destroyStream(static_cast<hc::client::SimStreamHandle*>(stream))) {
    return fail(hc::invalidArgument("hc_sim_stream_destroy: not a sim stream"));
  }
  return HC_OK;
}

hc_status_t hc_sim_stream_synchronize(hc_stream_t stream) {
  if (!sim().ownsStream(stream)) {
    return fail(hc::invalidArgument("hc_sim_stream_synchronize: not a sim stream"));
  }
  hc::Status s = sim().synchronize(stream);
  return s.isOk() ? HC_OK : fail(s);
}

hc_status_t hc_sim_memcpy(void* dst, const void* src, size_t bytes, hc_stream_t stream) {
  if (bytes != 0 && (dst == nullptr || src == nullptr)) {
    return fail(hc::invalidArgument("hc_sim_memcpy: null pointer"));
  }
  if (stream == nullptr) {
    std::memmove(dst, src, bytes);
    return HC_OK;
  }
  if (!sim().ownsStream(stream)) return fail(hc::invalidArgument("hc_sim_memcpy: not a sim stream"));
  static_cast<hc::client::SimStreamHandle*>(stream)->stream.copy(dst, src, bytes);
  return HC_OK;
}

}  // extern "C"
