// Survivors carry on (hetero_comm/hc.h): hc_comm_shrink makes a communicator of the parent's
// ranks that were not excluded, hc_comm_revoke stops the parent's operations on every rank.
// The daemon does both (daemon/session/comm_shrinker.h); the exclude list travels in a staging
// block of the segment, since a submission entry holds no list.
#include <algorithm>
#include <memory>
#include <string>

#include "client/src/comm_handles.h"
#include "client/src/comm_init.h"
#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/group.h"
#include "client/src/staging.h"
#include "client/src/submission.h"
#include "client/src/submit.h"
#include "hetero_comm/hc.h"

namespace hc::client {
namespace {

// The checks both calls share: a usable parent outside a group, on a daemon that knows them.
Status checkParent(const char* call, const CommState& parent) {
  if (groupOpen()) {
    return invalidArgument(std::string(call) +
                           " inside a group is not supported; call it after hc_group_end");
  }
  if (parent.conn->daemonMinor() < ipc::kShrinkMinor) {
    return invalidArgument(std::string(call) + " needs protocol 1." +
                           std::to_string(ipc::kShrinkMinor) + "; this hetero-commd speaks 1." +
                           std::to_string(parent.conn->daemonMinor()) + ": update the daemon");
  }
  return okStatus();
}

// The caller's rank among the survivors, or InvalidArgument for a list the daemon would refuse
// (checked here too, so a wrong list costs no round trip).
Result<int> survivorRank(const int* exclude, int count, int rank, int nranks) {
  if (count < 0 || (count > 0 && exclude == nullptr)) {
    return invalidArgument("hc_comm_shrink: exclude_count " + std::to_string(count) +
                           " with a NULL list, or negative");
  }
  if (count >= nranks) {
    return invalidArgument("hc_comm_shrink: " + std::to_string(count) + " of " +
                           std::to_string(nranks) + " ranks excluded: none would remain");
  }
  std::vector<int> sorted(exclude, exclude + count);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= nranks || (i > 0 && sorted[i] == sorted[i - 1])) {
      return invalidArgument("hc_comm_shrink: excluded rank " + std::to_string(sorted[i]) +
                             " is out of range for " + std::to_string(nranks) +
                             " ranks, or named twice");
    }
    if (sorted[i] == rank) {
      return invalidArgument("hc_comm_shrink: rank " + std::to_string(rank) +
                             " excludes itself; an excluded rank does not call shrink");
    }
  }
  // Survivors keep their order: one place down for every excluded rank below.
  return rank -
         static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), rank) - sorted.begin());
}

}  // namespace

hc_status_t splitRevoked(hc_comm_t comm, int color, int key, hc_comm_t* newcomm,
                         const hc_config_t* config) {
  hc_config_t blocking = HC_CONFIG_INITIALIZER;
  if (config != nullptr) blocking = *config;
  blocking.blocking = 1;
  hc_comm_t fresh = nullptr;
  hc_status_t rc = hc_comm_shrink(comm, nullptr, 0, &fresh, &blocking, HC_SHRINK_ABORT);
  if (rc != HC_OK) return rc;
  rc = hc_comm_split(fresh, color, key, newcomm, &blocking);
  // The split has finished (it blocked): the copy holds nothing anyone waits for.
  (void)hc_comm_destroy(fresh);
  return rc;
}

}  // namespace hc::client

using hc::Code;
using hc::Status;
using namespace hc::client;

extern "C" {

hc_status_t hc_comm_shrink(hc_comm_t comm, const int* exclude_ranks, int exclude_count,
                           hc_comm_t* newcomm, hc_config_t* config, int flags) {
  if (newcomm == nullptr) return fail(hc::invalidArgument("newcomm is NULL"));
  *newcomm = nullptr;
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  auto c = usableComm(comm);
  if (!c.isOk()) return fail(c.status(), pin.state());
  const std::shared_ptr<CommState>& parent = *c;
  Status s = checkParent("hc_comm_shrink", *parent);
  if (s.isOk() && flags != HC_SHRINK_DEFAULT && flags != HC_SHRINK_ABORT) {
    s = hc::invalidArgument("hc_comm_shrink: flags " + std::to_string(flags) +
                            " (HC_SHRINK_DEFAULT or HC_SHRINK_ABORT)");
  }
  const int nranks = parent->nranks.load();
  auto rank = survivorRank(exclude_ranks, exclude_count, parent->rank.load(), nranks);
  if (s.isOk() && !rank.isOk()) s = rank.status();
  auto cfg = readConfig(config);
  if (s.isOk() && !cfg.isOk()) s = cfg.status();
  if (!s.isOk()) return fail(s, parent.get());

  Submission sub;
  sub.comm = parent;
  sub.entry.op = static_cast<uint8_t>(hc::ipc::OpType::CommShrink);
  sub.entry.commHandle = parent->handle.load();
  sub.entry.root = -1;
  sub.entry.count = static_cast<uint64_t>(exclude_count);
  sub.entry.shrinkFlags = flags == HC_SHRINK_ABORT ? hc::ipc::kShrinkAbort : 0;
  sub.entry.timeoutMs = cfg->timeoutMs;
  sub.entry.recv = noBufferRef();
  sub.entry.send = noBufferRef();
  if (exclude_count > 0) {
    sub.staging = std::make_shared<Staging>(&parent->conn->staging(), exclude_ranks,
                                            exclude_count * sizeof(int32_t), nullptr, 0);
    sub.entry.send = stagedRef(sub.staging->sendOffset());
    sub.sendStaged = true;
  }
  auto state = std::make_shared<CommState>();
  state->conn = parent->conn;
  state->streamRuntime.store(parent->streamRuntime.load());
  state->device.store(parent->device.load());
  state->rank.store(*rank);
  state->nranks.store(nranks - exclude_count);
  hc_comm* handle = newCommHandle(state);
  if (handle == nullptr) return fail(Status{Code::NoResource, "out of memory"}, parent.get());
  sub.request = makeRequest(parent, /*tracked=*/true);
  s = prepareSubmission(sub);
  if (s.isOk()) s = parent->conn->submitUnit({&sub, 1});
  if (!s.isOk()) {
    finishRequest(sub.request, s, {}, FailureSeenBy::Caller);
    discardCommHandle(handle);
    return fail(s, parent.get());
  }
  return completeCreation(handle, sub.request, cfg->blocking, parent.get(), newcomm);
}

hc_status_t hc_comm_revoke(hc_comm_t comm, int flags) {
  CommPin pin(comm);
  if (!pin.status().isOk()) return failOn(pin);
  auto c = usableComm(comm);
  if (!c.isOk()) return fail(c.status(), pin.state());
  const std::shared_ptr<CommState>& st = *c;
  Status s = checkParent("hc_comm_revoke", *st);
  if (s.isOk() && flags != 0) {
    s = hc::invalidArgument("hc_comm_revoke: flags " + std::to_string(flags) +
                            " (only 0, NCCL_REVOKE_DEFAULT)");
  }
  if (!s.isOk()) return fail(s, st.get());
  hc::ipc::SubmitEntry e{};
  e.op = static_cast<uint8_t>(hc::ipc::OpType::CommRevoke);
  e.commHandle = st->handle.load();
  e.root = -1;
  e.send = noBufferRef();
  e.recv = noBufferRef();
  st->revoked.store(true);
  auto r = submitControl(*st->conn, e, st, /*tracked=*/true);
  if (!r.isOk()) return fail(r.status(), st.get());
  return waitRequest(*r, st.get());
}

}  // extern "C"
