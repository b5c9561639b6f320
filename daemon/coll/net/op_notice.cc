#include "daemon/coll/net/op_notice.h"

#include <algorithm>
#include <cstring>

namespace hc::coll::net {

OpNotice makeOpNotice(int origin, const Status& why) {
  OpNotice notice;
  notice.code = static_cast<int32_t>(why.code());
  notice.origin = origin;
  const std::string& text = why.message();
  std::memcpy(notice.text, text.data(), std::min(text.size(), kOpNoticeTextBytes - 1));
  return notice;
}

Status fromOpNotice(const OpNotice& notice, int from, size_t nodes) {
  const bool known = notice.code > 0 && notice.code < kNumCodes;
  const int origin =
      notice.origin >= 0 && static_cast<size_t>(notice.origin) < nodes ? notice.origin : from;
  const std::string text(notice.text, strnlen(notice.text, kOpNoticeTextBytes));
  std::string message = "node " + std::to_string(origin) + " failed this operation";
  if (origin != from) message += " (told by node " + std::to_string(from) + ")";
  if (!known) {
    message += ": a notice of unknown code " + std::to_string(notice.code);
  } else if (text.empty()) {
    message += " (" + std::string(codeName(static_cast<Code>(notice.code))) + ")";
  } else {
    message += ": " + text;
  }
  if (known && static_cast<Code>(notice.code) == Code::Unavailable) return unavailable(message);
  return Status(Code::RemoteError, std::move(message));
}

}  // namespace hc::coll::net
