#include "python/src/process_group_hetero.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "python/src/hc_tensors.h"

namespace hc::torchext {
namespace {

constexpr const char* kUniqueIdKey = "hetero/unique_ids";
// How often a rank at most writes its posted-operation count to the store; a timed-out rank
// reads the others' counts to name who has not posted.
constexpr auto kPublishInterval = std::chrono::seconds(1);
// How long an abort waits for issuing threads to leave libhcclient before it goes ahead.
constexpr auto kAbortLockWait = std::chrono::seconds(2);

constexpr const char* kAbortKey = "hetero/abort_reason";

std::string postedKey(int rank) { return "hetero/posted/" + std::to_string(rank); }

std::string rankList(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

}  // namespace

hc_request_t* ProcessGroupHetero::Issue::addRequest() {
  work.requests.push_back(nullptr);
  return &work.requests.back();
}

ProcessGroupHetero::ProcessGroupHetero(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), store_(store), timeout_(timeout) {
  bootstrap(timeout);
  for (Lane& lane : lanes_) lane.completion = std::thread([this, &lane] { completionLoop(lane); });
  watchdog_ = std::thread([this] { watchdogLoop(); });
  init();
}

void ProcessGroupHetero::bootstrap(std::chrono::milliseconds timeout) {
  hc_unique_id_t ids[kLanes]{};
  if (rank_ == 0) {
    for (auto& id : ids) {
      const hc_status_t st = hc_get_unique_id(&id);
      TORCH_CHECK(st == HC_OK, "hetero: cannot reach hetero-commd for a unique id: ",
                  lastError(st, nullptr),
                  " (is the daemon running? HC_SOCKET names its socket)");
    }
    const auto* p = reinterpret_cast<const uint8_t*>(ids);
    store_->set(kUniqueIdKey, std::vector<uint8_t>(p, p + sizeof ids));
  } else {
    const std::vector<uint8_t> bytes = store_->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof ids, "hetero: the store holds unique ids of ",
                bytes.size(), " bytes, not ", sizeof ids);
    std::memcpy(ids, bytes.data(), sizeof ids);
  }
  // Every rank joins the lanes in one order, so blocking joins cannot wait on each other.
  for (int i = 0; i < kLanes; ++i) {
    hc_config_t config = HC_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.timeout_ms = static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX));
    const hc_status_t st = hc_comm_init_rank_config(&lanes_[i].comm, size_, ids[i], rank_, &config);
    if (st != HC_OK) {
      const std::string why = lastError(st, nullptr);
      for (int j = 0; j < i; ++j) (void)hc_comm_abort(lanes_[j].comm);
      TORCH_CHECK(false, "hetero: rank ", rank_, " of ", size_,
                  " could not join its communicator: ", why);
    }
  }
}

ProcessGroupHetero::~ProcessGroupHetero() {
  // The completion thread may run future callbacks that take the GIL.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  // The completion threads drain what is pending first; the watchdog bounds how long that takes.
  for (Lane& lane : lanes_) {
    lane.queued.notify_all();
    if (lane.completion.joinable()) lane.completion.join();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watchdogStop_ = true;
  }
  watchdogWake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (!aborted_) {
    for (Lane& lane : lanes_) (void)hc_comm_destroy(lane.comm);
  }
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

void ProcessGroupHetero::check(hc_status_t st, const char* name, hc_comm_t comm) const {
  TORCH_CHECK(st == HC_OK, "hetero: ", name, ": ", lastError(st, comm));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHetero::run(const char* name, c10d::OpType type,
                                                       std::chrono::milliseconds timeout,
                                                       std::vector<at::Tensor> outputs,
                                                       const Body& body, LaneId laneId) {
  std::shared_lock<std::shared_timed_mutex> issuing(issueMutex_);
  if (aborted_) {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(false, "hetero: ", name, " on an aborted process group: ", abortText_);
  }
  const auto limit = timeout == c10d::kUnsetTimeout ? timeout_ : timeout;
  auto work = c10::make_intrusive<WorkHetero>(rank_, type, name, std::move(outputs),
                                              std::chrono::steady_clock::now() + limit);
  work->limit = limit;
  Lane& lane = lanes_[laneId];
  Issue issue{lane.comm, *work};
  body(issue);
  bool wakeWatchdog = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    work->setSeq(nextSeq_++);
    if (laneId == kCollectives) work->collective = ++collectivesPosted_;
    lane.pending.push_back(work);
    // The watchdog also publishes the posted count: wake it when its sleep would outlast the
    // next report (it may be sleeping towards a deadline far off).
    wakeWatchdog = work->deadline() < watchdogUntil_ ||
                   (laneId == kCollectives && lastPublish_ + kPublishInterval < watchdogUntil_);
  }
  lane.queued.notify_one();
  if (wakeWatchdog) watchdogWake_.notify_one();
  return work;
}

void ProcessGroupHetero::completionLoop(Lane& lane) {
  for (;;) {
    c10::intrusive_ptr<WorkHetero> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      lane.queued.wait(lock, [&] { return stopping_ || !lane.pending.empty(); });
      if (lane.pending.empty()) return;
      work = lane.pending.front();
    }
    hc_status_t first = HC_OK;
    std::string text;
    for (auto& r : work->requests) {
      const hc_status_t st = hc_wait(&r);
      if (st != HC_OK && first == HC_OK) {
        first = st;
        text = lastError(st, nullptr);  // this thread's last failed call: that hc_wait
      }
    }
    work->requests.clear();
    std::string abortText;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lane.pending.pop_front();
      abortText = abortText_;
    }
    if (first == HC_OK) {
      work->succeed();
      continue;
    }
    const std::string what = "hetero: " + work->name() + " (op " + std::to_string(work->seq()) +
                             " of this group, rank " + std::to_string(rank_) + ")";
    if (!abortText.empty()) {
      work->failWith(abortText.find(what) == 0 ? abortText : what + " failed: " + abortText);
      continue;
    }
    const std::string msg = what + " failed: " + text + peerAbortReason();
    work->failWith(msg);
    // As ProcessGroupNCCL's async error handling: the communicator is done for.
    abortWith(msg + "; the process group is aborted");
  }
}

void ProcessGroupHetero::abortWith(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return;
    abortText_ = text;
    aborted_ = true;
  }
  // The other ranks see only "aborted"; the store tells them why (the first to abort says it).
  try {
    const std::string why = "rank " + std::to_string(rank_) + ": " + text;
    store_->compareSet(kAbortKey, {}, std::vector<uint8_t>(why.begin(), why.end()));
  } catch (const std::exception&) {
    // The store is gone too: the ranks keep their own errors.
  }
  // hc_comm_abort frees the handle, so no thread may be entering libhcclient with it. An issuing
  // thread blocked inside the library (waiting for an earlier operation's buffer) is woken by the
  // abort itself, so the abort goes ahead when the lock does not come.
  const bool locked = issueMutex_.try_lock_for(kAbortLockWait);
  for (Lane& lane : lanes_) (void)hc_comm_abort(lane.comm);
  if (locked) issueMutex_.unlock();
}

void ProcessGroupHetero::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!watchdogStop_) {
    const auto now = std::chrono::steady_clock::now();
    const uint64_t posted = collectivesPosted_;
    if (posted != published_ && now - lastPublish_ >= kPublishInterval) {
      published_ = posted;
      lastPublish_ = now;
      lock.unlock();
      publishProgress(posted);
      lock.lock();
      continue;
    }
    const WorkHetero* late = nullptr;
    auto until = now + std::chrono::hours(1);
    if (!aborted_) {
      for (const Lane& lane : lanes_) {
        for (const auto& w : lane.pending) {
          if (w->deadline() <= now && late == nullptr) late = w.get();
          until = std::min(until, w->deadline());
        }
      }
    }
    if (late != nullptr) {
      const uint64_t seq = late->seq();
      const std::string name = late->name();
      const auto limit = late->limit;
      const uint64_t collective = late->collective;
      const int peer = late->peer;
      lock.unlock();
      std::string text = "hetero: " + name + " (op " + std::to_string(seq) +
                         " of this group, rank " + std::to_string(rank_) + ") timed out after " +
                         std::to_string(limit.count()) + " ms";
      text += peer >= 0 ? std::string(": rank ") + std::to_string(peer) +
                              " has not run the matching transfer"
                        : missingRanks(collective);
      abortWith(text + "; the process group is aborted: later operations fail at once");
      lock.lock();
      continue;
    }
    if (posted != published_) until = std::min(until, lastPublish_ + kPublishInterval);
    watchdogUntil_ = until;
    watchdogWake_.wait_until(lock, until);
    watchdogUntil_ = std::chrono::steady_clock::time_point::max();
  }
}

void ProcessGroupHetero::publishProgress(uint64_t posted) {
  try {
    const std::string s = std::to_string(posted);
    store_->set(postedKey(rank_), std::vector<uint8_t>(s.begin(), s.end()));
  } catch (const std::exception&) {
    // The store is gone (its host rank died): the daemon reports that failure on its own.
  }
}

std::string ProcessGroupHetero::peerAbortReason() {
  try {
    if (!store_->check({kAbortKey})) return "";
    const std::vector<uint8_t> v = store_->get(kAbortKey);
    return " (the first rank to abort the group said: " + std::string(v.begin(), v.end()) + ")";
  } catch (const std::exception&) {
    return "";
  }
}

std::string ProcessGroupHetero::missingRanks(uint64_t seq) {
  uint64_t posted = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted = collectivesPosted_;
    published_ = posted;
    lastPublish_ = std::chrono::steady_clock::now();
  }
  publishProgress(posted);
  std::vector<int> missing;
  try {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const std::string key = postedKey(r);
      // No key: the rank has posted nothing on this group.
      uint64_t count = 0;
      if (store_->check({key})) {
        const std::vector<uint8_t> v = store_->get(key);
        count = std::stoull(std::string(v.begin(), v.end()));
      }
      if (count < seq) missing.push_back(r);
    }
  } catch (const std::exception& e) {
    return std::string(" (the store could not say which ranks posted it: ") + e.what() + ")";
  }
  std::string s = missing.empty()
                      ? ": every rank posted it (hcctl trace on a daemon says what it waits for)"
                      : ": ranks " + rankList(missing) + " have not posted it";
  return s + " (as the ranks last reported, at most " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(kPublishInterval)
                            .count()) +
         " ms old)";
}

}  // namespace hc::torchext
