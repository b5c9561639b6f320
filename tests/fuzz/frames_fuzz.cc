// The client<->daemon frame decoder (common/ipc/frames.h) as the daemon meets it: one client's
// connection, frame after frame, each sent over a real SOCK_SEQPACKET pair with its descriptors,
// checked by validateFrame and handled by Session::handleFrame, until the first frame the daemon
// answers by closing the connection. A fresh session per input, so inputs never depend on each
// other. Every reply must be a frame the client accepts (session_fixture.h).
// Input: fuzz_inputs.h, readFrameRecords.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_inputs.h"
#include "tests/fuzz/session_fixture.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hc::fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hc::fuzz::FuzzSession session;
  for (const auto& record : hc::fuzz::readFrameRecords({data, size})) {
    if (!session.frame(record.bytes, record.fds).isOk()) break;
  }
  return 0;
}
