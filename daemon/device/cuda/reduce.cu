// The CUDA build of the shared reduction kernels: nvcc compiles this file alone into the fatbin
// that hc_device_cuda embeds (see CMakeLists.txt); the kernels themselves live in
// daemon/device/kernels so that the HIP backend compiles the same source.
#include "daemon/device/kernels/reduce_kernels.h"
