// The notices daemons of a communicator send each other outside its operations (net_runner.cc):
// a failure ("the communicator failed here, because ...") or a goodbye ("every rank here
// destroyed its handle"). A goodbye lists how many sends each departing rank posted to each rank
// of the daemon it goes to, so that a receive posted there later still takes what was sent
// before the sender left, and one for a send never posted fails at once instead of waiting.
//
// A notice is kNoticeBytes long, always (a transfer's two ends agree on its length), so the
// watch that receives it is one posted receive per daemon. Byte 0 says what it is:
//   'F'  failure: bytes 4..7 the failure's Status code (i32), text from byte 8, NUL-terminated
//        (cut to fit);
//   'B'  goodbye: byte 1 = 1 when every count fits, bytes 4..7 the number of counts (u32),
//        then the counts from byte 8, 16 bytes each (src u32, dst u32, sends u64). A goodbye
//        too long for one notice lists what fits; the ranks here then treat the senders of
//        pairs left out as having sent nothing more (their receives fail with a clear error).
// Everything read from a notice comes from the network: decoding checks every count's ranks
// against the layout (src on the sending daemon, dst here) and the length against the notice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/session/communicator.h"

namespace hc::session {

constexpr size_t kNoticeBytes = 2048;
constexpr uint8_t kNoticeFailure = 'F';
constexpr uint8_t kNoticeGoodbye = 'B';

std::vector<uint8_t> encodeFailureNotice(const Status& failure);
std::vector<uint8_t> encodeGoodbye(const std::vector<Communicator::SentCount>& counts);

// Byte 0 of a received notice; 0 when it is shorter than a notice.
uint8_t noticeKind(const std::vector<uint8_t>& notice);
// A failure notice's text (at most kNoticeBytes - 9 bytes, whatever the sender wrote).
std::string failureText(const std::vector<uint8_t>& notice);
// The code of the failure a notice reports, as this daemon takes it: Unavailable (a party went
// away: a rank's client died or aborted) stays so; anything else, or a code this daemon does not
// know, was that daemon's own failure, a RemoteError here.
Code failureCode(const std::vector<uint8_t>& notice);

struct Goodbye {
  std::vector<Communicator::SentCount> counts;
  bool complete = true;  // false: the sender had more counts than a notice holds
};
// `senders`: the ranks on the daemon it came from; `local`: whether a rank lives here. A count
// naming another rank, or a length that does not fit, is an InvalidArgument (a lying peer).
[[nodiscard]] Result<Goodbye> decodeGoodbye(const std::vector<uint8_t>& notice,
                                            const std::vector<uint32_t>& senders,
                                            const std::vector<bool>& local);

}  // namespace hc::session
