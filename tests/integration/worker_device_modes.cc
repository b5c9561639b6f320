// Device modes: stream-ordered operations on simulated device memory (hetero_comm/hc_sim.h) where
// something goes wrong. Both need --device.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

// Device memory for `count` int32 values, or null after printing why.
int32_t* deviceInts(const DeviceChoice& d, uint64_t count) {
  void* p = nullptr;
  if (hc_sim_malloc(&p, count * sizeof(int32_t), d.vendor, d.index) != HC_OK) {
    std::printf("error hc_sim_malloc: %s\n", hc_get_last_error(nullptr));
    return nullptr;
  }
  return static_cast<int32_t*>(p);
}

bool deviceOf(const WorkerOptions& o, DeviceChoice* d) {
  if (parseDeviceChoice(o.device, d) && d->sim) return true;
  std::printf("error --device sim:<vendor>:<index> is required, not '%s'\n", o.device.c_str());
  return false;
}

// One op of a device mode: its status, the status of each step as the mode names them, and the
// elements it got wrong.
struct DeviceOpOutcome {
  hc_status_t rc = HC_OK;
  std::string steps;  // " posted=0 stream=0 wait=0", or empty
  uint64_t wrong = 0;
};

// --iters ops of `op` on --count int32 of device memory each way, ordered on a stream of the
// --device; prints "op <k> status=<n><steps> wrong=<w> text=<t>" for each, going on after a
// failed one, then "#wrong <total>".
int loopOnDevice(hc_comm_t comm, const WorkerOptions& o,
                 const std::function<DeviceOpOutcome(int32_t* send, int32_t* recv, hc_stream_t,
                                                     uint64_t k)>& op) {
  DeviceChoice d;
  if (!deviceOf(o, &d)) return kExitUsage;
  int32_t* send = deviceInts(d, o.count);
  int32_t* recv = deviceInts(d, o.count);
  hc_stream_t stream = nullptr;
  if (send == nullptr || recv == nullptr ||
      hc_sim_stream_create(&stream, d.vendor, d.index) != HC_OK) {
    return kExitOpFailed;
  }
  uint64_t wrongTotal = 0;
  const uint64_t iters = o.iters == 0 ? 8 : o.iters;
  for (uint64_t k = 0; k < iters; ++k) {
    const DeviceOpOutcome r = op(send, recv, stream, k);
    wrongTotal += r.wrong;
    std::printf("op %llu status=%d%s wrong=%llu text=%s\n", static_cast<unsigned long long>(k),
                r.rc, r.steps.c_str(), static_cast<unsigned long long>(r.wrong),
                r.rc == HC_OK ? "" : hc_get_last_error(comm));
    std::fflush(stdout);
  }
  (void)hc_sim_stream_destroy(stream);
  (void)hc_sim_free(send);
  (void)hc_sim_free(recv);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrongTotal));
  return wrongTotal == 0 ? kExitOk : kExitWrong;
}

}  // namespace

int runDeviceOps(hc_comm_t comm, const WorkerOptions& o) {
  const uint64_t n = o.count;
  return loopOnDevice(comm, o, [&](int32_t* send, int32_t* recv, hc_stream_t stream, uint64_t k) {
    for (uint64_t i = 0; i < n; ++i) send[i] = static_cast<int32_t>((o.rank + 1) * 1000 + i + k);
    for (uint64_t i = 0; i < n; ++i) recv[i] = -1;
    hc_request_t req = nullptr;
    // Each step's status is kept apart: which one failed is part of what the tests check.
    const hc_status_t posted = hc_allreduce(send, recv, n, HC_INT32, HC_SUM, comm, stream, &req);
    const hc_status_t synced = posted == HC_OK ? hc_sim_stream_synchronize(stream) : HC_OK;
    const hc_status_t waited = req != nullptr ? hc_wait(&req) : HC_OK;
    DeviceOpOutcome r;
    r.rc = posted != HC_OK ? posted : waited != HC_OK ? waited : synced;
    r.steps = " posted=" + std::to_string(posted) + " stream=" + std::to_string(synced) +
              " wait=" + std::to_string(waited);
    if (r.rc == HC_OK) {
      // sum over r of (r+1)*1000 + i + k, computed here from the definition.
      for (uint64_t i = 0; i < n; ++i) {
        int64_t expected = 0;
        for (int q = 0; q < o.nranks; ++q) expected += (q + 1) * 1000 + static_cast<int64_t>(i + k);
        if (recv[i] != static_cast<int32_t>(expected)) ++r.wrong;
      }
    }
    return r;
  });
}

int runDeviceSendRecv(hc_comm_t comm, const WorkerOptions& o) {
  const uint64_t n = o.count;
  const int next = (o.rank + 1) % o.nranks;
  const int prev = (o.rank + o.nranks - 1) % o.nranks;
  return loopOnDevice(comm, o, [&](int32_t* send, int32_t* recv, hc_stream_t stream, uint64_t k) {
    for (uint64_t i = 0; i < n; ++i)
      send[i] = static_cast<int32_t>((o.rank + 1) * 7919 + i * 3 + k);
    for (uint64_t i = 0; i < n; ++i) recv[i] = -1;
    hc_request_t sendReq = nullptr, recvReq = nullptr;
    hc_status_t posted = hc_group_start();
    if (posted == HC_OK) posted = hc_send(send, n, HC_INT32, next, comm, stream, &sendReq);
    if (posted == HC_OK) posted = hc_recv(recv, n, HC_INT32, prev, comm, stream, &recvReq);
    const hc_status_t ended = hc_group_end();
    if (posted == HC_OK) posted = ended;
    const hc_status_t synced = posted == HC_OK ? hc_sim_stream_synchronize(stream) : HC_OK;
    const hc_status_t sent = sendReq != nullptr ? hc_wait(&sendReq) : HC_OK;
    const hc_status_t got = recvReq != nullptr ? hc_wait(&recvReq) : HC_OK;
    DeviceOpOutcome r;
    r.rc = posted != HC_OK ? posted : sent != HC_OK ? sent : got != HC_OK ? got : synced;
    if (r.rc == HC_OK) {
      // What rank prev sent, from the formula above.
      for (uint64_t i = 0; i < n; ++i) {
        if (recv[i] != static_cast<int32_t>((prev + 1) * 7919 + i * 3 + k)) ++r.wrong;
      }
    }
    return r;
  });
}

int runStreamWait(hc_comm_t comm, const WorkerOptions& o) {
  DeviceChoice d;
  if (!deviceOf(o, &d)) return kExitUsage;
  if (o.rank != 0) {
    // The other ranks never post: rank 0's stream waits on them until something ends the job.
    std::printf("idle\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  int32_t* buf = deviceInts(d, o.count);
  hc_stream_t stream = nullptr;
  if (buf == nullptr || hc_sim_stream_create(&stream, d.vendor, d.index) != HC_OK) {
    return kExitOpFailed;
  }
  // No request: the stream alone carries the operation, and its failure must come back as the
  // communicator's asynchronous error.
  hc_status_t rc = hc_allreduce(buf, buf, o.count, HC_INT32, HC_SUM, comm, stream, nullptr);
  std::printf("posted status=%d\n", rc);
  std::fflush(stdout);
  hc_status_t sync = hc_sim_stream_synchronize(stream);
  hc_status_t async = HC_OK;
  (void)hc_comm_get_async_error(comm, &async);
  std::printf("stream status=%d\n", sync);
  printStatus("result", async, comm);
  std::fflush(stdout);
  return async == HC_OK ? kExitOk : kExitOpFailed;
}

}  // namespace hc::integ
