// Encoding and validation of the socket frames of common/ipc/protocol.h.
// Depends on common/status.h and protocol.h.
#pragma once

#include <cstring>
#include <span>
#include <string_view>

#include "common/ipc/protocol.h"
#include "common/status.h"

namespace hc::ipc {

// A zeroed frame of type T with its header filled in.
template <typename T>
T makeFrame(FrameType type, uint32_t requestId) {
  static_assert(std::is_standard_layout_v<T> && std::is_trivially_copyable_v<T>);
  T frame;
  std::memset(&frame, 0, sizeof(frame));
  frame.header = FrameHeader{kFrameMagic, kProtocolMajor, static_cast<uint16_t>(type),
                             static_cast<uint32_t>(sizeof(T)), requestId};
  return frame;
}

template <typename T>
std::span<const uint8_t> frameBytes(const T& frame) {
  return {reinterpret_cast<const uint8_t*>(&frame), sizeof(T)};
}

// Copies s into a fixed char field, truncating and always NUL-terminating.
template <size_t N>
void copyText(char (&field)[N], std::string_view s) {
  size_t n = s.size() < N - 1 ? s.size() : N - 1;
  std::memcpy(field, s.data(), n);
  field[n] = '\0';
}

// The byte size a frame of this type must have; 0 for an unknown type.
size_t frameSize(FrameType type);
// How many descriptors a frame of this type carries (Welcome: 2, CmaProbe: 1, MemRegister: see
// validateFrame, others: 0).
size_t frameFdCount(FrameType type);

// Checks one received frame: its magic, major version, known type, exact length, NUL-terminated
// text fields, and the number of descriptors that came with it. Returns the frame's type, or
// InvalidArgument with a message that names what is wrong.
Result<FrameType> validateFrame(std::span<const uint8_t> bytes, size_t fdCount);

// Reads a validated frame of type T (the bytes may be unaligned).
template <typename T>
T frameAs(std::span<const uint8_t> bytes) {
  T frame;
  std::memcpy(&frame, bytes.data(), sizeof(T));
  return frame;
}

// An Error frame carrying status.
ErrorFrame makeErrorFrame(uint32_t requestId, const Status& status);

}  // namespace hc::ipc
