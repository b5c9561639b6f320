#include "daemon/transport/transport.h"

namespace hc::transport {

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host:
      return "host";
    case MemoryKind::Cuda:
      return "cuda";
    case MemoryKind::Rocm:
      return "rocm";
  }
  return "unknown";
}

}  // namespace hc::transport
