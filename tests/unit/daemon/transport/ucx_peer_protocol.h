// How the SIGKILL test talks to its peer process (ucx_peer_main.cc) before UCX takes over: each
// side writes its Transport address as a length-prefixed blob on a pipe. Then the peer streams
// kStreamBytes messages on tags makeTag(kStreamComm, 0, 0), (.., 1, 0), ... until it is killed or
// its parent goes away.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace hc::transport::testing {

constexpr size_t kStreamBytes = 8 << 20;
constexpr uint64_t kStreamComm = 7;
constexpr uint32_t kStreamSeed = 77;

inline bool writeBlob(int fd, const std::vector<uint8_t>& blob) {
  const uint32_t length = static_cast<uint32_t>(blob.size());
  auto writeAll = [fd](const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
      ssize_t w = ::write(fd, b, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      b += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  };
  return writeAll(&length, sizeof(length)) && writeAll(blob.data(), blob.size());
}

// nullopt on EOF, error, or when nothing arrives before the deadline.
inline std::optional<std::vector<uint8_t>> readBlob(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto readAll = [&](void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd pfd{fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
      ssize_t r = ::read(fd, b, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      b += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  };
  uint32_t length = 0;
  if (!readAll(&length, sizeof(length)) || length > (1u << 20)) return std::nullopt;
  std::vector<uint8_t> blob(length);
  if (!readAll(blob.data(), blob.size())) return std::nullopt;
  return blob;
}

}  // namespace hc::transport::testing
