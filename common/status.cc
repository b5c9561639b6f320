#include "common/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hc {

std::string_view codeName(Code code) {
  switch (code) {
    case Code::Ok: return "Ok";
    case Code::InProgress: return "InProgress";
    case Code::NoResource: return "NoResource";
    case Code::InvalidArgument: return "InvalidArgument";
    case Code::NotFound: return "NotFound";
    case Code::PermissionDenied: return "PermissionDenied";
    case Code::Unavailable: return "Unavailable";
    case Code::Timeout: return "Timeout";
    case Code::RemoteError: return "RemoteError";
    case Code::DeviceError: return "DeviceError";
    case Code::TransportError: return "TransportError";
    case Code::Internal: return "Internal";
    case Code::Unsupported: return "Unsupported";
  }
  return "Unknown";
}

std::string Status::toString() const {
  std::string s(codeName(code_));
  if (!message_.empty()) s += ": " + message_;
  return s;
}

Status systemError(std::string_view what, int err) {
  Code code = Code::Internal;
  if (err == EACCES || err == EPERM) code = Code::PermissionDenied;
  if (err == ENOENT) code = Code::NotFound;
  if (err == ECONNREFUSED || err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
    code = Code::Unavailable;
  }
  if (err == ENOMEM || err == EMFILE || err == ENFILE || err == ENOSPC) code = Code::NoResource;
  return {code, std::string(what) + ": " + std::strerror(err)};
}

namespace detail {
void checkFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "HC_CHECK failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace hc
