#include "common/ipc/frames.h"

#include <cmath>
#include <string>

namespace hc::ipc {
namespace {

// A frame's fixed text field must hold its NUL: readers treat it as a C string.
template <typename T, size_t N>
Result<FrameType> textField(std::span<const uint8_t> bytes, char (T::*field)[N], const char* what,
                            FrameType type) {
  T frame = frameAs<T>(bytes);
  if (std::memchr(frame.*field, '\0', N) == nullptr) {
    return invalidArgument(std::string(what) + " is not NUL-terminated");
  }
  return type;
}

// The same for a text field inside a nested struct.
template <size_t N>
Status nulTerminated(const char (&field)[N], const char* what) {
  if (std::memchr(field, '\0', N) == nullptr) {
    return invalidArgument(std::string(what) + " is not NUL-terminated");
  }
  return okStatus();
}

// A reply's count and echoed index in range, its text held by its NULs, its figures finite and
// not negative: the client copies all of it to its caller without looking again.
Result<FrameType> deviceQueryReply(std::span<const uint8_t> bytes) {
  auto frame = frameAs<DeviceQueryReplyFrame>(bytes);
  if (frame.total > kMaxDeviceEntries) {
    return invalidArgument("DeviceQueryReply announces " + std::to_string(frame.total) +
                           " devices (at most " + std::to_string(kMaxDeviceEntries) + ")");
  }
  if (frame.index >= frame.total && !(frame.total == 0 && frame.index == 0)) {
    return invalidArgument("DeviceQueryReply index " + std::to_string(frame.index) +
                           " is out of range of its total " + std::to_string(frame.total));
  }
  const DeviceEntry& d = frame.device;
  for (Status s : {nulTerminated(d.id, "DeviceQueryReply id"),
                   nulTerminated(d.vendor, "DeviceQueryReply vendor"),
                   nulTerminated(d.backend, "DeviceQueryReply backend"),
                   nulTerminated(d.model, "DeviceQueryReply model"),
                   nulTerminated(d.pciBusId, "DeviceQueryReply pciBusId"),
                   nulTerminated(d.note, "DeviceQueryReply note")}) {
    if (!s.isOk()) return s;
  }
  for (double v : {d.weight, d.h2dGBps, d.d2hGBps, d.reduceGBps, d.rateGBps}) {
    if (!std::isfinite(v) || v < 0) {
      return invalidArgument("DeviceQueryReply carries a figure that is negative or not finite");
    }
  }
  return FrameType::DeviceQueryReply;
}

}  // namespace

size_t frameSize(FrameType type) {
  switch (type) {
    case FrameType::Hello:
      return sizeof(HelloFrame);
    case FrameType::Welcome:
      return sizeof(WelcomeFrame);
    case FrameType::Error:
      return sizeof(ErrorFrame);
    case FrameType::MemAlloc:
      return sizeof(MemAllocFrame);
    case FrameType::MemAllocReply:
      return sizeof(MemAllocReplyFrame);
    case FrameType::MemFree:
      return sizeof(MemFreeFrame);
    case FrameType::MemFreeReply:
      return sizeof(MemFreeReplyFrame);
    case FrameType::CommAbort:
      return sizeof(CommAbortFrame);
    case FrameType::CmaProbe:
      return sizeof(CmaProbeFrame);
    case FrameType::CmaProbeReply:
      return sizeof(CmaProbeReplyFrame);
    case FrameType::PeerInfo:
      return sizeof(PeerInfoFrame);
    case FrameType::PeerInfoReply:
      return sizeof(PeerInfoReplyFrame);
    case FrameType::CommRoot:
      return sizeof(CommRootFrame);
    case FrameType::CommRootReply:
      return sizeof(CommRootReplyFrame);
    case FrameType::MemRegister:
      return sizeof(MemRegisterFrame);
    case FrameType::MemRegisterReply:
      return sizeof(MemRegisterReplyFrame);
    case FrameType::MemUnregister:
      return sizeof(MemUnregisterFrame);
    case FrameType::MemUnregisterReply:
      return sizeof(MemUnregisterReplyFrame);
    case FrameType::DeviceQuery:
      return sizeof(DeviceQueryFrame);
    case FrameType::DeviceQueryReply:
      return sizeof(DeviceQueryReplyFrame);
    case FrameType::CommArea:
      return sizeof(CommAreaFrame);
    case FrameType::CommAreaReply:
      return sizeof(CommAreaReplyFrame);
  }
  return 0;
}

size_t frameFdCount(FrameType type) {
  switch (type) {
    case FrameType::Welcome:
      return 2;  // the segment memfd, the daemon's eventfd
    case FrameType::CmaProbe:
      return 1;  // the client's /proc/self/mem (protocol 1.4)
    default:
      return 0;
  }
}

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
  if (header.magic != kFrameMagic)
    return invalidArgument("bad frame magic (not a hetero-comm peer)");
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
  size_t fdsExpected = frameFdCount(type);
  if (type == FrameType::MemRegister &&
      frameAs<MemRegisterFrame>(bytes).handleKind == static_cast<uint32_t>(HandleKind::Fd)) {
    fdsExpected = 1;  // the memfd or VMM fd of the allocation
  }
  if (type == FrameType::CommAreaReply) {
    const uint32_t present = frameAs<CommAreaReplyFrame>(bytes).present;
    if (present > 1) return invalidArgument("CommAreaReply present is " + std::to_string(present));
    fdsExpected = present;  // the area's memfd
  }
  if (fdCount != fdsExpected) {
    return invalidArgument("frame type " + std::to_string(header.type) + " came with " +
                           std::to_string(fdCount) + " descriptors, expected " +
                           std::to_string(fdsExpected));
  }
  switch (type) {
    case FrameType::Hello:
      return textField(bytes, &HelloFrame::clientName, "Hello client name", type);
    case FrameType::Error:
      return textField(bytes, &ErrorFrame::message, "Error message", type);
    case FrameType::CmaProbeReply:
      return textField(bytes, &CmaProbeReplyFrame::message, "CmaProbeReply message", type);
    case FrameType::PeerInfoReply:
      return textField(bytes, &PeerInfoReplyFrame::address, "PeerInfoReply address", type);
    case FrameType::CommRoot:
      return textField(bytes, &CommRootFrame::address, "CommRoot address", type);
    case FrameType::DeviceQueryReply:
      return deviceQueryReply(bytes);
    case FrameType::MemRegister: {
      // An unknown flag could change what the frame means (protocol.h): refuse, never guess.
      const uint16_t flags = frameAs<MemRegisterFrame>(bytes).flags;
      if ((flags & ~kKnownMemRegisterFlags) != 0) {
        return invalidArgument("MemRegister flags " + std::to_string(flags) +
                               " carry bits this side does not know (known: " +
                               std::to_string(kKnownMemRegisterFlags) + ")");
      }
      return type;
    }
    default:
      break;
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
