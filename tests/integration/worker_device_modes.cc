// Device modes: stream-ordered operations on device memory (a sim or CUDA device, worker_device.h)
// where something goes wrong. Data is prepared and checked in host shadows and moves by stream
// copies. deviceops and devicesendrecv also run on host memory (no --device), for jobs that mix
// both; streamwait needs --device.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tests/integration/worker_cases.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ {
namespace {

// The buffers and stream of one device loop: --count int32 each way. Without a device, host
// memory and no stream.
struct DeviceLoop {
  WorkerDevice* device = nullptr;
  hc_stream_t stream = nullptr;
  MirroredBuffer send;
  MirroredBuffer recv;

  int32_t* sendShadow() const { return send.shadowAs<int32_t>(); }
  int32_t* recvShadow() const { return recv.shadowAs<int32_t>(); }
  // Both shadows to the device, on the stream, before the op is posted.
  DeviceStatus copyIn() {
    DeviceStatus s = send.toDevice(stream);
    return s.ok() ? recv.toDevice(stream) : s;
  }
  DeviceStatus synchronize() {
    return device != nullptr ? device->synchronize(stream) : DeviceStatus{};
  }
};

// One op of a device mode: its status, the status of each step as the mode names them, and the
// elements it got wrong.
struct DeviceOpOutcome {
  hc_status_t rc = HC_OK;
  std::string steps;  // " posted=0 stream=0 wait=0", or empty
  uint64_t wrong = 0;
  std::string error;  // a failed device call's words (else the communicator's last error)
};

// --iters ops of `op` on --count int32 of device memory each way, ordered on a stream of the
// --device (host memory and no stream without one); prints "op <k> status=<n><steps> wrong=<w>
// text=<t>" for each, going on after a failed one, then "#wrong <total>".
int loopOnDevice(hc_comm_t comm, const WorkerOptions& o,
                 const std::function<DeviceOpOutcome(DeviceLoop&, uint64_t k)>& op) {
  WorkerDevicePtr device;
  if (!openModeDevice(o.device, false, &device)) return kExitUsage;
  DeviceLoop loop;
  loop.device = device.get();
  const size_t bytes = std::max<uint64_t>(o.count, 1) * sizeof(int32_t);
  for (MirroredBuffer* b : {&loop.send, &loop.recv}) {
    if (DeviceStatus s = b->allocate(device.get(), bytes); !s.ok()) {
      std::printf("error %s\n", s.error.c_str());
      return kExitOpFailed;
    }
  }
  if (device != nullptr) {
    if (DeviceStatus s = device->createStream(&loop.stream); !s.ok()) {
      std::printf("error %s\n", s.error.c_str());
      return kExitOpFailed;
    }
  }
  uint64_t wrongTotal = 0;
  const uint64_t iters = o.iters == 0 ? 8 : o.iters;
  for (uint64_t k = 0; k < iters; ++k) {
    const DeviceOpOutcome r = op(loop, k);
    wrongTotal += r.wrong;
    const std::string text = r.rc == HC_OK      ? ""
                             : !r.error.empty() ? r.error
                                                : hc_get_last_error(comm);
    std::printf("op %llu status=%d%s wrong=%llu text=%s\n", static_cast<unsigned long long>(k),
                r.rc, r.steps.c_str(), static_cast<unsigned long long>(r.wrong), text.c_str());
    std::fflush(stdout);
  }
  if (loop.stream != nullptr) device->destroyStream(loop.stream);
  std::printf("#wrong %llu\n", static_cast<unsigned long long>(wrongTotal));
  return wrongTotal == 0 ? kExitOk : kExitWrong;
}

// After the op was posted: its results back to the recv shadow (on the stream, so in its order),
// then the stream. A failed copy is the outcome's error.
hc_status_t copyOutAndSynchronize(DeviceLoop& loop, bool posted, DeviceOpOutcome* r) {
  DeviceStatus s = posted ? loop.recv.toHost(loop.stream) : DeviceStatus{};
  if (DeviceStatus synced = loop.synchronize(); s.ok()) s = synced;
  if (!s.ok()) r->error = s.error;
  return s.status;
}

}  // namespace

int runDeviceOps(hc_comm_t comm, const WorkerOptions& o) {
  const uint64_t n = o.count;
  return loopOnDevice(comm, o, [&](DeviceLoop& loop, uint64_t k) {
    int32_t* send = loop.sendShadow();
    int32_t* recv = loop.recvShadow();
    for (uint64_t i = 0; i < n; ++i) send[i] = static_cast<int32_t>((o.rank + 1) * 1000 + i + k);
    for (uint64_t i = 0; i < n; ++i) recv[i] = -1;
    DeviceOpOutcome r;
    if (DeviceStatus s = loop.copyIn(); !s.ok()) {
      r.rc = s.status;
      r.error = s.error;
      return r;
    }
    hc_request_t req = nullptr;
    // Each step's status is kept apart: which one failed is part of what the tests check.
    const hc_status_t posted = hc_allreduce(loop.send.device(), loop.recv.device(), n, HC_INT32,
                                            HC_SUM, comm, loop.stream, &req);
    const hc_status_t synced = copyOutAndSynchronize(loop, posted == HC_OK, &r);
    const hc_status_t waited = req != nullptr ? hc_wait(&req) : HC_OK;
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
  return loopOnDevice(comm, o, [&](DeviceLoop& loop, uint64_t k) {
    int32_t* send = loop.sendShadow();
    int32_t* recv = loop.recvShadow();
    for (uint64_t i = 0; i < n; ++i)
      send[i] = static_cast<int32_t>((o.rank + 1) * 7919 + i * 3 + k);
    for (uint64_t i = 0; i < n; ++i) recv[i] = -1;
    DeviceOpOutcome r;
    if (DeviceStatus s = loop.copyIn(); !s.ok()) {
      r.rc = s.status;
      r.error = s.error;
      return r;
    }
    hc_request_t sendReq = nullptr, recvReq = nullptr;
    hc_status_t posted = hc_group_start();
    if (posted == HC_OK) {
      posted = hc_send(loop.send.device(), n, HC_INT32, next, comm, loop.stream, &sendReq);
    }
    if (posted == HC_OK) {
      posted = hc_recv(loop.recv.device(), n, HC_INT32, prev, comm, loop.stream, &recvReq);
    }
    const hc_status_t ended = hc_group_end();
    if (posted == HC_OK) posted = ended;
    const hc_status_t synced = copyOutAndSynchronize(loop, posted == HC_OK, &r);
    const hc_status_t sent = sendReq != nullptr ? hc_wait(&sendReq) : HC_OK;
    const hc_status_t got = recvReq != nullptr ? hc_wait(&recvReq) : HC_OK;
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
  WorkerDevicePtr device;
  if (!openModeDevice(o.device, true, &device)) return kExitUsage;
  if (o.rank != 0) {
    // The other ranks never post: rank 0's stream waits on them until something ends the job.
    std::printf("idle\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  void* buf = nullptr;
  hc_stream_t stream = nullptr;
  DeviceStatus s = device->allocate(std::max<uint64_t>(o.count, 1) * sizeof(int32_t), &buf);
  if (s.ok()) s = device->createStream(&stream);
  if (!s.ok()) {
    std::printf("error %s\n", s.error.c_str());
    return kExitOpFailed;
  }
  // No request: the stream alone carries the operation, and its failure must come back as the
  // communicator's asynchronous error. The buffer's contents do not matter.
  hc_status_t rc = hc_allreduce(buf, buf, o.count, HC_INT32, HC_SUM, comm, stream, nullptr);
  std::printf("posted status=%d\n", rc);
  std::fflush(stdout);
  const DeviceStatus sync = device->synchronize(stream);
  hc_status_t async = HC_OK;
  (void)hc_comm_get_async_error(comm, &async);
  std::printf("stream status=%d\n", sync.status);
  printStatus("result", async, comm);
  std::fflush(stdout);
  return async == HC_OK ? kExitOk : kExitOpFailed;
}

}  // namespace hc::integ
