// Parsing --device, opening the device it names, and MirroredBuffer: the parts of the worker's
// device layer that are the same for every device.
#include "tests/integration/worker_device.h"

#include <cstdio>

namespace hc::integ {
namespace {

// The digits after `prefix` in `text` as an index; false when text has another shape.
bool indexAfter(const std::string& text, const std::string& prefix, int* index) {
  if (text.rfind(prefix, 0) != 0) return false;
  const std::string digits = text.substr(prefix.size());
  if (digits.empty() || digits.size() > 6 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *index = std::stoi(digits);
  return true;
}

}  // namespace

bool parseDeviceChoice(const std::string& text, DeviceChoice* out) {
  *out = DeviceChoice{};
  if (text.empty()) return true;
  if (indexAfter(text, "sim:nvidia:", &out->index)) {
    out->kind = DeviceChoice::Kind::Sim;
    out->vendor = HC_SIM_NVIDIA;
  } else if (indexAfter(text, "sim:amd:", &out->index)) {
    out->kind = DeviceChoice::Kind::Sim;
    out->vendor = HC_SIM_AMD;
  } else if (indexAfter(text, "cuda:", &out->index)) {
    out->kind = DeviceChoice::Kind::Cuda;
  } else {
    return false;
  }
  return true;
}

bool workerSupports(const DeviceChoice& choice, std::string* why) {
  if (choice.kind != DeviceChoice::Kind::Cuda || workerHasCuda()) return true;
  *why =
      "this worker was built without CUDA; hc_gpu_worker (built where the CUDA toolkit is) "
      "runs on cuda:N";
  return false;
}

WorkerDevicePtr makeWorkerDevice(const DeviceChoice& choice, DeviceStatus* error) {
  switch (choice.kind) {
    case DeviceChoice::Kind::Sim:
      return makeSimDevice(choice, error);
    case DeviceChoice::Kind::Cuda:
      return makeCudaDevice(choice, error);
    case DeviceChoice::Kind::Host:
      break;
  }
  *error = {HC_INVALID_ARGUMENT, "host memory is no device"};
  return nullptr;
}

bool openModeDevice(const std::string& text, bool required, WorkerDevicePtr* out) {
  out->reset();
  DeviceChoice choice;
  if (!parseDeviceChoice(text, &choice)) {
    std::printf("error bad --device '%s' (sim:nvidia:N, sim:amd:N or cuda:N)\n", text.c_str());
    return false;
  }
  if (!choice.onDevice()) {
    if (required) std::printf("error this mode needs --device (sim:<vendor>:N or cuda:N)\n");
    return !required;
  }
  DeviceStatus error;
  *out = makeWorkerDevice(choice, &error);
  // The device's own words name it.
  if (*out == nullptr) std::printf("error %s\n", error.error.c_str());
  return *out != nullptr;
}

void MirroredBuffer::reset() {
  if (owner_ == nullptr) {
    (void)hc_mem_free(shadow_);
  } else {
    owner_->release(device_);
    owner_->releaseHost(shadow_);
  }
  owner_ = nullptr;
  device_ = shadow_ = nullptr;
  bytes_ = 0;
}

DeviceStatus MirroredBuffer::allocate(WorkerDevice* device, size_t bytes) {
  reset();
  owner_ = device;
  bytes_ = bytes;
  void* p = nullptr;
  if (device == nullptr) {
    if (hc_mem_alloc(&p, bytes) != HC_OK) {
      return {HC_NO_RESOURCE,
              "hc_mem_alloc(" + std::to_string(bytes) + "): " + hc_get_last_error(nullptr)};
    }
    device_ = shadow_ = static_cast<uint8_t*>(p);
    return {};
  }
  DeviceStatus s = device->allocate(bytes, &p);
  if (!s.ok()) return s;
  device_ = static_cast<uint8_t*>(p);
  s = device->allocateHost(bytes, &p);
  if (s.ok()) shadow_ = static_cast<uint8_t*>(p);
  return s;
}

bool MirroredBuffer::holds(const void* inShadow) const {
  const auto* p = static_cast<const uint8_t*>(inShadow);
  return shadow_ != nullptr && p >= shadow_ && p <= shadow_ + bytes_;
}

void* MirroredBuffer::deviceAddress(const void* inShadow) const {
  if (inShadow == nullptr) return nullptr;
  return device_ + (static_cast<const uint8_t*>(inShadow) - shadow_);
}

DeviceStatus MirroredBuffer::toDevice(hc_stream_t stream, size_t bytes) {
  if (owner_ == nullptr) return {};
  return owner_->copy(device_, shadow_, bytes == 0 ? bytes_ : bytes, stream);
}

DeviceStatus MirroredBuffer::toHost(hc_stream_t stream, size_t bytes) {
  if (owner_ == nullptr) return {};
  return owner_->copy(shadow_, device_, bytes == 0 ? bytes_ : bytes, stream);
}

}  // namespace hc::integ
