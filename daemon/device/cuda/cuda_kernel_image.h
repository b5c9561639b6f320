// The reduction kernels' fatbin, compiled by nvcc from daemon/device/kernels at build time and
// embedded in hc_device_cuda (embed_fatbin.S.in), so the daemon carries its kernels with it and
// loads them with cuModuleLoadData when a driver is present.
// Depends on nothing; safe to include anywhere (no cuda.h).
#pragma once

#include <cstdint>
#include <span>

namespace hc::device {

// Every fatbin starts with this 32-bit little-endian word (NVIDIA's fatbin header magic).
inline constexpr uint32_t kFatbinMagic = 0xba55ed50u;

// The embedded image, whole: sm_80 and sm_90 cubins and compute_90 PTX (cmake/HcCuda.cmake,
// HC_CUDA_ARCHS). Valid for the life of the process.
std::span<const uint8_t> reduceKernelFatbin();

}  // namespace hc::device
