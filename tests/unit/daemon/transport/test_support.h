// Test data and UCX settings shared by the transport tests and the ucx_transport_peer helper
// process (which does not link GoogleTest).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/transport/ucx/ucx_transport.h"

namespace hc::transport::testing {

// Message bytes that tell every message (seed) and position apart.
inline std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> data(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    data[i] = static_cast<uint8_t>(x >> 24);
  }
  return data;
}

// What the UCX tests run on: tcp and self only, on the loopback interface, so that two transports
// in one process (or two processes on one host) talk like separate nodes.
inline UcxOptions testUcxOptions() {
  UcxOptions options;
  options.transports = "tcp,self";
  options.socketIfname = "=lo";
  options.keepaliveInterval = std::chrono::milliseconds(1000);
  return options;
}

}  // namespace hc::transport::testing
