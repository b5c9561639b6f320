#include "daemon/session/notices.h"

#include <algorithm>
#include <cstring>

namespace hc::session {
namespace {

constexpr size_t kFailureCodeAt = 4;
constexpr size_t kFailureTextAt = 8;
constexpr size_t kCountsAt = 8;
constexpr size_t kCountBytes = 16;
constexpr size_t kMaxCounts = (kNoticeBytes - kCountsAt) / kCountBytes;

struct WireCount {
  uint32_t src;
  uint32_t dst;
  uint64_t sends;
};
static_assert(sizeof(WireCount) == kCountBytes);

}  // namespace

std::vector<uint8_t> encodeFailureNotice(const Status& failure) {
  std::vector<uint8_t> notice(kNoticeBytes, 0);
  notice[0] = kNoticeFailure;
  const auto code = static_cast<int32_t>(failure.code());
  std::memcpy(notice.data() + kFailureCodeAt, &code, sizeof(code));
  const std::string& text = failure.message();
  std::memcpy(notice.data() + kFailureTextAt, text.data(),
              std::min(text.size(), kNoticeBytes - kFailureTextAt - 1));
  return notice;
}

std::vector<uint8_t> encodeGoodbye(const std::vector<Communicator::SentCount>& counts) {
  std::vector<uint8_t> notice(kNoticeBytes, 0);
  notice[0] = kNoticeGoodbye;
  const uint32_t n = static_cast<uint32_t>(std::min(counts.size(), kMaxCounts));
  notice[1] = n == counts.size() ? 1 : 0;
  std::memcpy(notice.data() + 4, &n, sizeof(n));
  for (uint32_t i = 0; i < n; ++i) {
    const WireCount w{static_cast<uint32_t>(counts[i].src), static_cast<uint32_t>(counts[i].dst),
                      counts[i].sends};
    std::memcpy(notice.data() + kCountsAt + i * kCountBytes, &w, sizeof(w));
  }
  return notice;
}

uint8_t noticeKind(const std::vector<uint8_t>& notice) {
  return notice.size() < kNoticeBytes ? 0 : notice[0];
}

std::string failureText(const std::vector<uint8_t>& notice) {
  if (notice.size() <= kFailureTextAt) return "";
  const auto* text = reinterpret_cast<const char*>(notice.data() + kFailureTextAt);
  return std::string(text, strnlen(text, notice.size() - kFailureTextAt - 1));
}

Code failureCode(const std::vector<uint8_t>& notice) {
  int32_t code = 0;
  if (notice.size() >= kFailureCodeAt + sizeof(code)) {
    std::memcpy(&code, notice.data() + kFailureCodeAt, sizeof(code));
  }
  return code == static_cast<int32_t>(Code::Unavailable) ? Code::Unavailable : Code::RemoteError;
}

Result<Goodbye> decodeGoodbye(const std::vector<uint8_t>& notice,
                              const std::vector<uint32_t>& senders,
                              const std::vector<bool>& local) {
  if (noticeKind(notice) != kNoticeGoodbye) {
    return Status{Code::InvalidArgument, "not a goodbye notice"};
  }
  uint32_t n = 0;
  std::memcpy(&n, notice.data() + 4, sizeof(n));
  if (n > kMaxCounts) {
    return Status{Code::InvalidArgument,
                  "a goodbye lists " + std::to_string(n) + " send counts; at most " +
                      std::to_string(kMaxCounts) + " fit"};
  }
  Goodbye g;
  g.complete = notice[1] == 1;
  for (uint32_t i = 0; i < n; ++i) {
    WireCount w;
    std::memcpy(&w, notice.data() + kCountsAt + i * kCountBytes, sizeof(w));
    const bool fromSender = std::find(senders.begin(), senders.end(), w.src) != senders.end();
    if (!fromSender || w.dst >= local.size() || !local[w.dst]) {
      return Status{Code::InvalidArgument, "a goodbye counts sends from rank " +
                                               std::to_string(w.src) + " to rank " +
                                               std::to_string(w.dst) +
                                               ", not a pair from its daemon to this one"};
    }
    g.counts.push_back({static_cast<int>(w.src), static_cast<int>(w.dst), w.sends});
  }
  return g;
}

}  // namespace hc::session
