#include "common/ipc/frames.h"

#include <string>

namespace hc::ipc {
namespace {

bool terminated(const char* field, size_t n) { return std::memchr(field, '\0', n) != nullptr; }

}  // namespace

size_t frameSize(FrameType type) {
  switch (type) {
    case FrameType::Hello: return sizeof(HelloFrame);
    case FrameType::Welcome: return sizeof(WelcomeFrame);
    case FrameType::Error: return sizeof(ErrorFrame);
    case FrameType::MemAlloc: return sizeof(MemAllocFrame);
    case FrameType::MemAllocReply: return sizeof(MemAllocReplyFrame);
    case FrameType::MemFree: return sizeof(MemFreeFrame);
    case FrameType::MemFreeReply: return sizeof(MemFreeReplyFrame);
    case FrameType::CommAbort: return sizeof(CommAbortFrame);
    case FrameType::CmaProbe: return sizeof(CmaProbeFrame);
    case FrameType::CmaProbeReply: return sizeof(CmaProbeReplyFrame);
  }
  return 0;
}

size_t frameFdCount(FrameType type) { return type == FrameType::Welcome ? 2 : 0; }

Result<FrameType> validateFrame(std::span<const uint8_t> bytes, size_t fdCount) {
  if (bytes.size() < sizeof(FrameHeader)) {
    return invalidArgument("frame of " + std::to_string(bytes.size()) +
                           " bytes is shorter than a frame header");
  }
  if (bytes.size() > kMaxFrameBytes) {
    return invalidArgument("frame of " + std::to_string(bytes.size()) + " bytes exceeds the " +
                           std::to_string(kMaxFrameBytes) + "-byte maximum");
  }
  auto header = frameAs<FrameHeader>(bytes);
  if (header.magic != kFrameMagic) return invalidArgument("bad frame magic (not a hetero-comm peer)");
  if (header.major != kProtocolMajor) {
    return invalidArgument("protocol version " + std::to_string(header.major) +
                           " not supported (this side speaks " + std::to_string(kProtocolMajor) +
                           ")");
  }
  auto type = static_cast<FrameType>(header.type);
  size_t expected = frameSize(type);
  if (expected == 0) return invalidArgument("unknown frame type " + std::to_string(header.type));
  if (header.length != bytes.size() || bytes.size() != expected) {
    return invalidArgument("frame type " + std::to_string(header.type) + " has length " +
                           std::to_string(bytes.size()) + " (header says " +
                           std::to_string(header.length) + ", expected " +
                           std::to_string(expected) + ")");
  }
  if (fdCount != frameFdCount(type)) {
    return invalidArgument("frame type " + std::to_string(header.type) + " came with " +
                           std::to_string(fdCount) + " descriptors, expected " +
                           std::to_string(frameFdCount(type)));
  }
  if (type == FrameType::Hello) {
    auto hello = frameAs<HelloFrame>(bytes);
    if (!terminated(hello.clientName, sizeof(hello.clientName))) {
      return invalidArgument("Hello client name is not NUL-terminated");
    }
  }
  if (type == FrameType::Error) {
    auto error = frameAs<ErrorFrame>(bytes);
    if (!terminated(error.message, sizeof(error.message))) {
      return invalidArgument("Error message is not NUL-terminated");
    }
  }
  if (type == FrameType::CmaProbeReply) {
    auto reply = frameAs<CmaProbeReplyFrame>(bytes);
    if (!terminated(reply.message, sizeof(reply.message))) {
      return invalidArgument("CmaProbeReply message is not NUL-terminated");
    }
  }
  return type;
}

ErrorFrame makeErrorFrame(uint32_t requestId, const Status& status) {
  auto frame = makeFrame<ErrorFrame>(FrameType::Error, requestId);
  frame.status = static_cast<int32_t>(status.code());
  copyText(frame.message, status.message());
  return frame;
}

}  // namespace hc::ipc
