// hc_rank_worker's CUDA half: none. It builds and runs on every machine, with or without the CUDA
// toolkit; hc_gpu_worker links worker_device_cuda.cc instead.
#include "tests/integration/worker_device.h"

namespace hc::integ {

bool workerHasCuda() { return false; }

WorkerDevicePtr makeCudaDevice(const DeviceChoice& choice, DeviceStatus* error) {
  *error = {HC_INVALID_ARGUMENT, "cuda:" + std::to_string(choice.index) +
                                     ": this worker was built without CUDA (use hc_gpu_worker)"};
  return nullptr;
}

}  // namespace hc::integ
