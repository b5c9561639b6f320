// The ring side of Connection: submitting entries, taking completions, waiting, and failing
// requests when a communicator is aborted or the daemon goes away.
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "client/src/comm_state.h"
#include "client/src/connection.h"
#include "client/src/small_ops.h"
#include "common/ipc/frames.h"
#include "common/seqpacket.h"

namespace hc::client {
namespace {

Status abortedStatus() { return unavailable("the communicator was aborted"); }

}  // namespace

Status Connection::submitUnit(std::span<Submission> unit) {
  if (unit.empty()) return okStatus();
  if (dead()) return deadStatus_;
  const CommState* comm = unit.front().comm.get();
  std::lock_guard<std::mutex> lock(submitMutex_);
  // Credits: no more in flight than the completion ring holds, so completions normally never
  // wait in the daemon. Only the unit's start waits for one: the daemon completes a unit's
  // entries only once it holds all of them, so waiting for credits inside a unit larger than the
  // ring would never end. Its extra completions wait in the daemon until reap() makes room.
  const uint32_t capacity = view_.completion.capacity();
  if (inFlight_.load() >= capacity) {
    HC_RETURN_IF_ERROR(waitUntil([&] { return inFlight_.load() < capacity; }, comm));
  }
  for (Submission& sub : unit) {
    const RequestPtr& r = sub.request;
    r->id = nextRequestId_++;
    sub.entry.requestId = r->id;
    {
      std::lock_guard<std::mutex> reapLock(reapMutex_);
      pending_[r->id] = PendingEntry{r, sub.staging, sub.regionUses};
    }
    inFlight_.fetch_add(1);
    Status s = pushEntry(sub.entry, comm);
    if (!s.isOk()) {
      std::lock_guard<std::mutex> reapLock(reapMutex_);
      pending_.erase(r->id);
      inFlight_.fetch_sub(1);
      return s;
    }
  }
  return okStatus();
}

Status Connection::pushEntry(const ipc::SubmitEntry& entry, const CommState* comm) {
  using Clock = std::chrono::steady_clock;
  const auto spinUntil = Clock::now() + std::chrono::microseconds(spinUs_);
  auto nap = std::chrono::microseconds(2);
  for (;;) {
    if (view_.submit.push(entry)) {
      ipc::wakeDaemonIfSleeping(view_.header, daemonEventFd_);
      return okStatus();
    }
    // Full. The daemon takes entries whenever it runs (it was rung by the last push), and no
    // completion announces that, so poll with a growing nap rather than sleep on the futex.
    ipc::wakeDaemonIfSleeping(view_.header, daemonEventFd_);
    reap();
    if (comm != nullptr && comm->aborted.load()) return abortedStatus();
    if (dead()) return deadStatus_;
    if (Clock::now() < spinUntil) {
      ::sched_yield();
      continue;
    }
    HC_RETURN_IF_ERROR(noticeHangUp());
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

void Connection::reap() {
  if (dead()) return;
  struct Taken {
    PendingEntry pending;
    Status status;
    CompletionInfo info;
  };
  std::vector<Taken> taken;
  bool corrupt = false;
  bool backlog = false;
  {
    std::unique_lock<std::mutex> lock(reapMutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread is reaping for everyone
    ipc::CompletionEntry e;
    bool popped = false;
    // Completions wait in the daemon only when more are outstanding than the ring holds (a
    // group larger than the ring); then it must hear that there is room once this pops some.
    const bool mayBeHeldBack = inFlight_.load() > view_.completion.capacity();
    for (;;) {
      ipc::PopResult pr = view_.completion.pop(&e);
      if (pr == ipc::PopResult::Empty) break;
      if (pr == ipc::PopResult::Corrupt) {
        corrupt = true;
        break;
      }
      popped = true;
      inFlight_.fetch_sub(1);
      auto it = pending_.find(e.requestId);
      if (it == pending_.end()) continue;
      e.message[sizeof(e.message) - 1] = '\0';
      Status s = e.status == 0 ? okStatus() : Status{static_cast<Code>(e.status), e.message};
      taken.push_back({std::move(it->second), std::move(s), {e.value, e.rank, e.nranks}});
      pending_.erase(it);
    }
    backlog = popped && mayBeHeldBack;
  }
  // Outside the lock: copying staged results out may take a while, and other threads reap on.
  // A request already failed locally (abort) is not finished twice; dropping its entry here is
  // what returns its staging block, now that the daemon is done with it.
  for (Taken& t : taken) finishRequest(t.pending.request, t.status, t.info);
  if (corrupt) markDead(internalError("completion ring is corrupt"));
  if (backlog && !dead()) {
    // Unconditionally: the daemon's check before it sleeps looks at submission rings only, so
    // the sleeping flag could read "awake" here while it is about to sleep on held completions.
    // A pending eventfd count makes its next epoll_wait return at once.
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(daemonEventFd_, &one, sizeof(one));
  }
  // A thread that slept through the daemon's wake-up while this one finished its request would
  // otherwise sleep out its timeout.
  if (!taken.empty() && view_.header->clientSleepers.load() > 0) {
    view_.header->completionFutex.fetch_add(1);
    ipc::futexWake(&view_.header->completionFutex, INT_MAX);
  }
}

void Connection::poll() {
  reap();
  if (!dead()) (void)noticeHangUp();
}

void Connection::pollThrottled() {
  // A watchdog polling every few milliseconds notices a dead daemon within about this long.
  constexpr int64_t kHangUpCheckIntervalNs = 10'000'000;
  reap();
  if (dead()) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = lastHangUpCheckNs_.load(std::memory_order_relaxed);
  if (now - last < kHangUpCheckIntervalNs) return;
  if (!lastHangUpCheckNs_.compare_exchange_strong(last, now)) return;  // another thread checks
  (void)noticeHangUp();
}

bool Connection::daemonHungUp() const {
  pollfd p{socket_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

Status Connection::noticeHangUp() {
  if (!daemonHungUp()) return okStatus();
  markDead(
      unavailable("hetero-commd (pid " + std::to_string(daemonPid_) + ") closed the connection"));
  return deadStatus_;
}

void Connection::markDead(const Status& why) {
  std::vector<PendingEntry> failed;
  {
    std::lock_guard<std::mutex> lock(reapMutex_);
    if (dead()) return;
    deadStatus_ = why;  // before dead_: whoever sees dead() reads a complete status
    dead_.store(true, std::memory_order_release);
    for (auto& [id, p] : pending_) failed.push_back(std::move(p));
    pending_.clear();
  }
  for (PendingEntry& p : failed) finishRequest(p.request, why);
  if (view_.header != nullptr) {
    view_.header->completionFutex.fetch_add(1);
    ipc::futexWake(&view_.header->completionFutex, INT_MAX);
  }
}

Status Connection::waitUntil(const std::function<bool()>& ready, const CommState* comm) {
  using Clock = std::chrono::steady_clock;
  const auto spinUntil = Clock::now() + std::chrono::microseconds(spinUs_);
  for (;;) {
    reap();
    // Small ops of any communicator may be what ready() waits for (finalize, a process holding
    // several ranks), and they move only when someone looks.
    const bool smallOpsPending = SmallOpArea::anyPending();
    if (smallOpsPending) SmallOpArea::progressAll();
    if (ready()) return okStatus();
    if (comm != nullptr && comm->aborted.load()) return abortedStatus();
    if (dead()) return deadStatus_;
    if (Clock::now() < spinUntil) {
      // Ranks and the daemon often outnumber the cores: yield so the party we wait for can run.
      ::sched_yield();
      continue;
    }
    // Sleep. The sleeper count and the futex value are published before the last check, so a
    // completion posted after it either bumps the futex (the wait returns at once) or sees the
    // sleeper and wakes it (protocol.h, SegmentHeader).
    view_.header->clientSleepers.fetch_add(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    uint32_t seen = view_.header->completionFutex.load(std::memory_order_acquire);
    reap();
    if (!ready() && !(comm != nullptr && comm->aborted.load()) && !dead()) {
      // Bounded so that a daemon that died is noticed through the socket within 100 ms, and
      // small ops, which do not bump this word, are looked at every millisecond.
      ipc::futexWait(&view_.header->completionFutex, seen,
                     smallOpsPending ? 1'000'000 : 100'000'000);
    }
    view_.header->clientSleepers.fetch_sub(1);
    if (!ready() && !dead()) (void)noticeHangUp();
  }
}

void Connection::abort(CommState* comm, uint64_t handle) {
  comm->aborted.store(true);
  // The other ranks' small ops end now, not when the daemon hears of it.
  if (comm->area) comm->area->abandon(abortedStatus());
  if (!dead() && handle != 0) {
    std::lock_guard<std::mutex> lock(socketMutex_);
    auto f = ipc::makeFrame<ipc::CommAbortFrame>(ipc::FrameType::CommAbort, 0);
    f.commHandle = handle;
    [[maybe_unused]] Status s = sendMessage(socket_, ipc::frameBytes(f));
  }
  // The entries stay pending: the daemon may still touch their staging blocks until it
  // completes them, and their completions return the ring credits.
  std::vector<RequestPtr> failed;
  {
    std::lock_guard<std::mutex> lock(reapMutex_);
    for (auto& [id, p] : pending_) {
      if (p.request->comm.get() == comm) failed.push_back(p.request);
    }
  }
  for (const RequestPtr& r : failed) finishRequest(r, abortedStatus());
  if (view_.header != nullptr && !dead()) {
    view_.header->completionFutex.fetch_add(1);
    ipc::futexWake(&view_.header->completionFutex, INT_MAX);
  }
}

}  // namespace hc::client
