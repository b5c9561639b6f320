// Framed messages over a SOCK_SEQPACKET Unix socket, with file descriptors passed by
// SCM_RIGHTS. One message is one frame; the kernel keeps the boundaries.
// Depends on common/status.h, common/unique_fd.h and libc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace hc {

constexpr size_t kMaxPassedFds = 4;

struct ReceivedMessage {
  std::vector<uint8_t> bytes;
  std::vector<UniqueFd> fds;  // received descriptors, closed unless the caller takes them
  bool truncated = false;     // MSG_TRUNC: the frame was longer than the buffer
  bool fdsTruncated = false;  // MSG_CTRUNC: descriptors were dropped by the kernel
};

// Sends one frame and, optionally, descriptors. Never raises SIGPIPE.
Status sendMessage(int sock, std::span<const uint8_t> bytes, std::span<const int> fds = {});

// Receives one frame of at most maxBytes. Returns Unavailable when the peer closed the socket,
// NoResource when block is false and nothing is waiting.
Result<ReceivedMessage> receiveMessage(int sock, size_t maxBytes, bool block = false);

// Connects to a SOCK_SEQPACKET Unix socket at path (blocking, close-on-exec).
Result<UniqueFd> connectSeqpacket(const std::string& path);

}  // namespace hc
