#include "daemon/transport/ucx/ucx_status.h"

#include <spdlog/spdlog.h>

#include <string>

namespace hc::transport::ucx {
namespace {

Code codeFor(ucs_status_t status) {
  if (UCS_IS_LINK_ERROR(status) || UCS_IS_ENDPOINT_ERROR(status)) return Code::Unavailable;
  switch (status) {
    case UCS_OK:
      return Code::Ok;
    case UCS_INPROGRESS:
      return Code::InProgress;
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_EXCEEDS_LIMIT:
      return Code::NoResource;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_NOT_IMPLEMENTED:
    case UCS_ERR_OUT_OF_RANGE:
      return Code::InvalidArgument;
    case UCS_ERR_NO_ELEM:
    case UCS_ERR_NO_DEVICE:
      return Code::NotFound;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CONNECTION_RESET:
      return Code::Unavailable;
    case UCS_ERR_TIMED_OUT:
      return Code::Timeout;
    default:
      return Code::TransportError;  // MESSAGE_TRUNCATED, IO_ERROR and the rest
  }
}

}  // namespace

Status ucsStatus(ucs_status_t status, std::string_view what) {
  if (status == UCS_OK) return okStatus();
  return Status(codeFor(status), std::string(what) + ": " + ucs_status_string(status));
}

void logUcsFailure(const Status& status) { spdlog::warn("ucx: {}", status.toString()); }

}  // namespace hc::transport::ucx
