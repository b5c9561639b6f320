#include "daemon/transport/transport.h"

#include <cstdio>

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

std::string tagString(const Tag& tag) {
  char text[64];
  std::snprintf(text, sizeof(text), "%llx/%llx/%x", static_cast<unsigned long long>(tag.comm),
                static_cast<unsigned long long>(tag.seq), tag.chunk);
  return text;
}

}  // namespace hc::transport
