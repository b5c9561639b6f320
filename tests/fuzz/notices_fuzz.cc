// The notices daemons send each other (daemon/session/notices.h), as daemon/session/net_runner.cc reads one
// from another daemon: its kind, a failure's text, a goodbye's send counts checked against where
// the communicator's ranks live (the input's notice may have any length, though a watch always
// receives kNoticeBytes). What decodeGoodbye promises is checked too: every count it
// accepts names a rank of the sending daemon and a rank of this one, and a goodbye it accepts
// encodes back to the same counts.
// Input: fuzz_inputs.h, readNoticeInput.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "daemon/session/notices.h"
#include "tests/fuzz/fuzz_inputs.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "notices: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hc::session;
  auto input = hc::fuzz::readNoticeInput({data, size});
  if (!input) return 0;
  const uint8_t kind = noticeKind(input->notice);
  // A watch receives exactly kNoticeBytes; the text must fit in them whatever the sender wrote.
  const std::string text = failureText(input->notice);
  if (input->notice.size() <= kNoticeBytes) {
    require(text.size() <= kNoticeBytes - 9, "a failure text longer than a notice holds");
  }
  auto goodbye = decodeGoodbye(input->notice, input->senders, input->local);
  if (!goodbye.isOk()) return 0;
  require(kind == kNoticeGoodbye, "a notice of another kind decoded as a goodbye");
  for (const Communicator::SentCount& c : goodbye->counts) {
    const bool fromSender = std::find(input->senders.begin(), input->senders.end(),
                                      static_cast<uint32_t>(c.src)) != input->senders.end();
    require(fromSender, "a goodbye's count names a sender of another daemon");
    require(c.dst >= 0 && static_cast<size_t>(c.dst) < input->local.size() && input->local[c.dst],
            "a goodbye's count names a receiver that is not here");
  }
  auto again = decodeGoodbye(encodeGoodbye(goodbye->counts), input->senders, input->local);
  require(again.isOk() && again->counts.size() == goodbye->counts.size(),
          "an accepted goodbye does not encode back to the same counts");
  return 0;
}
