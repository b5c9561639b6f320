// UCX status codes enter the project here, and only here: ucsStatus() converts one into an
// hc::Status, HC_UCS_TRY() converts, logs and returns it. Private to daemon/transport/ucx.
#pragma once

#include <ucs/type/status.h>

#include <string_view>

#include "common/status.h"

namespace hc::transport::ucx {

// The hc::Status for `status`, described as "<what>: <UCX's text>". Does not log: a request's
// completion status is converted here for every request, and a failed peer is logged once where
// its endpoint error is handled, not once per request.
//   - a peer or connection that went away (reset, timeout, unreachable, rejected, cancelled)
//     -> Unavailable;
//   - a message longer than its receive buffer -> TransportError;
//   - back-pressure -> NoResource; bad arguments -> InvalidArgument; missing device -> NotFound;
//   - anything else -> TransportError.
Status ucsStatus(ucs_status_t status, std::string_view what);

// Logs a failed UCX call made on the control path (context, worker, endpoint setup).
void logUcsFailure(const Status& status);

}  // namespace hc::transport::ucx

// Evaluates a UCX call returning ucs_status_t; on failure converts it, logs it once and returns
// the hc::Status from the enclosing function (which returns Status or Result<T>).
#define HC_UCS_TRY(expr, what)                                                              \
  do {                                                                                      \
    const ucs_status_t hc_ucs_status_ = (expr);                                             \
    if (hc_ucs_status_ != UCS_OK) {                                                         \
      ::hc::Status hc_converted_ = ::hc::transport::ucx::ucsStatus(hc_ucs_status_, (what)); \
      ::hc::transport::ucx::logUcsFailure(hc_converted_);                                   \
      return hc_converted_;                                                                 \
    }                                                                                       \
  } while (0)
