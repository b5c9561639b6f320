// Submission-entry validation (daemon/session/validate.h): one 128-byte SubmitEntry, as a client
// writes it into its ring, taken the way Engine::accept takes it: its done flag is tracked first
// (and set when the entry completes, which writes the segment at the offset the client chose),
// an unknown operation is refused, CommInit, CommDestroy and CommRevoke take other paths, a
// CommShrink's exclude list is read from the segment (readExcludeList), and resolveOp
// checks the rest, on a communicator of nranks ranks where this client is rank `rank`. The
// session has two heap allocations and cross-memory attach (session_fixture.h); device regions
// are not registered, so Device references reach only the "not registered" refusal.
// Input: fuzz_inputs.h, readSubmitInput.
#include <cstddef>
#include <cstdint>

#include "daemon/session/validate.h"
#include "tests/fuzz/fuzz_inputs.h"
#include "tests/fuzz/session_fixture.h"

namespace {

using hc::ipc::OpType;

hc::Status accept(const hc::session::SessionPtr& session, const hc::fuzz::SubmitInput& input) {
  const hc::ipc::SubmitEntry& e = input.entry;
  auto checked = hc::checkedOpType(e.op);  // as Engine::accept() does
  if (!checked.isOk()) return checked.status();
  const OpType type = *checked;
  if (type == OpType::CommInit || type == OpType::CommDestroy || type == OpType::CommRevoke) {
    return {};
  }
  // A shrink's exclude list is read from the segment (CommShrinker::shrink).
  if (type == OpType::CommShrink) {
    return hc::session::readExcludeList(e, *session, input.nranks, input.rank).status();
  }
  auto op = hc::session::resolveOp(e, session, input.rank, input.nranks);
  if (!op.isOk()) return op.status();
  (void)hc::session::describeOp(op.value());  // the mismatch report names every accepted op
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hc::fuzz::quietLogs();
  (void)hc::fuzz::submitFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = hc::fuzz::readSubmitInput({data, size});
  if (!input) return 0;
  const hc::session::SessionPtr& session = hc::fuzz::submitFixture().session.session();
  const hc::ipc::SubmitEntry& e = input->entry;
  if (e.doneFlag != 0 && !session->trackDoneFlag(e.requestId, e.doneFlag).isOk()) return 0;
  // Completing the entry sets its done flag; the client side then takes the completion, so the
  // ring never fills across inputs.
  session->complete(e.requestId, accept(session, *input));
  hc::ipc::CompletionEntry taken;
  while (session->segment()->view().completion.pop(&taken) == hc::ipc::PopResult::Ok) {
  }
  return 0;
}
