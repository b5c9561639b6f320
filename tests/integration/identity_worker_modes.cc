// hc_identity_worker's modes (identity_worker.h): rounds of verified collectives over every
// communicator the process holds, splits, a relay of communicators, and ordered transfers.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "tests/integration/identity_worker.h"
#include "tests/integration/worker_modes.h"

namespace hc::integ::identity {
namespace {

// What rank `rank` of a communicator with this base contributes at element `index` of round
// `iter` of an operation (`salt` tells the operations apart). A sum over 200 ranks with bases up
// to 10^4 stays far inside int32.
int32_t valueOf(int64_t base, int rank, uint64_t iter, uint64_t index, int salt) {
  return static_cast<int32_t>(base * (rank + 1) + 3 * static_cast<int64_t>(iter % 1000) +
                              static_cast<int64_t>(index % 4096) + salt);
}

const char* phaseName(Phase p) {
  switch (p) {
    case Phase::AllReduce:
      return "allreduce";
    case Phase::Broadcast:
      return "broadcast";
    case Phase::SendRecv:
      return "sendrecv";
  }
  return "?";
}

int rootOf(uint64_t iter, int nranks) {
  return static_cast<int>(iter % static_cast<uint64_t>(nranks));
}

// Computed from the values every rank contributes, never from what the daemon returned.
int32_t expectedValue(const Member& m, Phase p, uint64_t iter, uint64_t index) {
  switch (p) {
    case Phase::AllReduce: {
      int64_t sum = 0;
      for (int r = 0; r < m.nranks; ++r) sum += valueOf(m.base, r, iter, index, 0);
      return static_cast<int32_t>(sum);
    }
    case Phase::Broadcast:
      return valueOf(m.base, rootOf(iter, m.nranks), iter, index, 1);
    case Phase::SendRecv:
      return valueOf(m.base, (m.rank + m.nranks - 1) % m.nranks, iter, index, 2);
  }
  return 0;
}

// Fills the send buffer, poisons the receive buffer and posts p; its requests go to m.reqs.
hc_status_t post(Member& m, Phase p, uint64_t iter, uint64_t count) {
  const int salt = static_cast<int>(p);
  for (uint64_t i = 0; i < count; ++i) m.send[i] = valueOf(m.base, m.rank, iter, i, salt);
  std::memset(m.recv, 0xA5, count * sizeof(int32_t));
  switch (p) {
    case Phase::AllReduce:
      return hc_allreduce(m.send, m.recv, count, HC_INT32, HC_SUM, m.comm, nullptr, &m.reqs[0]);
    case Phase::Broadcast:
      return hc_broadcast(m.send, m.recv, count, HC_INT32, rootOf(iter, m.nranks), m.comm, nullptr,
                          &m.reqs[0]);
    case Phase::SendRecv: {
      // A ring: to the next rank and from the previous one, in one group of this communicator.
      hc_status_t rc = hc_group_start();
      if (rc != HC_OK) return rc;
      hc_status_t s =
          hc_send(m.send, count, HC_INT32, (m.rank + 1) % m.nranks, m.comm, nullptr, &m.reqs[0]);
      hc_status_t r = hc_recv(m.recv, count, HC_INT32, (m.rank + m.nranks - 1) % m.nranks, m.comm,
                              nullptr, &m.reqs[1]);
      rc = hc_group_end();
      return s != HC_OK ? s : (r != HC_OK ? r : rc);
    }
  }
  return HC_INVALID_ARGUMENT;
}

hc_status_t waitRequests(Member& m) {
  hc_status_t first = HC_OK;
  for (hc_request_t& req : m.reqs) {
    if (req == nullptr) continue;
    hc_status_t rc = hc_wait(&req);
    if (first == HC_OK) first = rc;
  }
  return first;
}

// Counts the elements of m.recv that differ from expected(i), naming the first of them.
uint64_t countWrong(const Member& m, uint64_t count,
                    const std::function<int32_t(uint64_t)>& expected, const std::string& what) {
  // A thousand communicators that all go wrong would drown the output: the first lines say it.
  constexpr int kMaxWrongLines = 40;
  static int lines = 0;
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const int32_t want = expected(i);
    if (m.recv[i] == want) continue;
    if (wrong++ == 0 && lines++ < kMaxWrongLines) {
      std::printf("WRONG %s on %s (count %llu): element %llu is %d, expected %d\n", what.c_str(),
                  m.name.c_str(), static_cast<unsigned long long>(count),
                  static_cast<unsigned long long>(i), m.recv[i], want);
    }
  }
  return wrong;
}

// One round: each operation of --ops is posted on every member, in order, before any member's is
// waited for (members that are ranks of one communicator complete only together); then all are
// waited for and verified. A failure ends the round at once.
void runRound(const std::vector<Member*>& ms, const Options& o, uint64_t iter, bool announce,
              Outcome* out) {
  const uint64_t count = o.counts[iter % o.counts.size()];
  for (Phase p : o.ops) {
    const std::string what = std::string(phaseName(p)) + " round " + std::to_string(iter);
    watchdogNote(what + " of " + std::to_string(ms.size()) + " communicators");
    for (Member* m : ms) {
      hc_status_t rc = post(*m, p, iter, count);
      if (rc != HC_OK) return recordFailure(out, rc, *m, "posting " + what);
    }
    if (announce) {
      std::printf("posted\n");
      std::fflush(stdout);
      announce = false;
    }
    for (Member* m : ms) {
      hc_status_t rc = waitRequests(*m);
      if (rc != HC_OK) return recordFailure(out, rc, *m, what);
      out->wrong += countWrong(
          *m, count, [&](uint64_t i) { return expectedValue(*m, p, iter, i); }, what);
    }
  }
}

}  // namespace

void runRounds(const std::vector<Member*>& ms, const Options& o, uint64_t first, uint64_t n,
               bool announce, Outcome* out) {
  for (uint64_t it = first; it < first + n && !out->failed(); ++it) {
    runRound(ms, o, it, announce && it == first, out);
  }
}

// Every parent splits (in order) into pairs of consecutive ranks with reversed keys, so that the
// higher parent rank becomes rank 0 of its pair.
void runSplit(std::vector<Member>& parents, const Options& o, Outcome* out) {
  std::vector<Member> children(parents.size());
  const std::vector<Member*> order = ordered(parents, o.order, o.ranks.size());
  for (Member* p : order) {
    Member& c = children[static_cast<size_t>(p - parents.data())];
    const int color = p->rank / 2;
    c.name = p->name + " child " + std::to_string(color);
    c.base = 10 * p->base + color + 1;
    hc_config_t config = HC_CONFIG_INITIALIZER;
    config.blocking = 0;  // this process may hold both ranks of a pair
    watchdogNote("hc_comm_split of " + p->name);
    hc_status_t rc = hc_comm_split(p->comm, color, -p->rank, &c.comm, &config);
    if (rc != HC_OK && rc != HC_IN_PROGRESS) {
      recordFailure(out, rc, *p, "hc_comm_split");
      c.comm = nullptr;
    }
  }
  const std::vector<Member*> childOrder = ordered(children, o.order, o.ranks.size());
  awaitCreation(childOrder, "hc_comm_split", out);
  for (size_t i = 0; i < children.size() && !out->failed(); ++i) {
    Member& c = children[i];
    const int wantRank = 1 - parents[i].rank % 2;
    if (hc_comm_user_rank(c.comm, &c.rank) != HC_OK || hc_comm_count(c.comm, &c.nranks) != HC_OK) {
      recordFailure(out, HC_INTERNAL, c, "hc_comm_user_rank/hc_comm_count");
    } else if (c.rank != wantRank || c.nranks != 2) {
      ++out->wrong;
      std::printf("WRONG %s is rank %d of %d, expected rank %d of 2\n", c.name.c_str(), c.rank,
                  c.nranks, wantRank);
    }
  }
  Arena arena;
  if (!out->failed() && out->wrong == 0) {
    if (arena.assign(children, *std::max_element(o.counts.begin(), o.counts.end()))) {
      runRounds(childOrder, o, 0, o.iters, false, out);
    } else {
      recordFailure(out, HC_NO_RESOURCE, children.front(), "hc_mem_alloc");
    }
  }
  endMembers(childOrder, false, out);
  // The parents' own sequence goes on where it was, unaffected by the children's.
  runRounds(order, o, o.iters, 1, false, out);
}

void runRelay(std::vector<Member>& members, const Options& o, Outcome* out) {
  for (size_t j = 0; j < members.size() && !out->failed(); ++j) {
    runRounds({&members[j]}, o, 0, o.iters, false, out);
    if (j + 1 == members.size() || out->failed()) break;
    startInits({&members[j + 1]}, o, out);
    endMembers({&members[j]}, false, out);
    awaitCreation({&members[j + 1]}, "hc_comm_init_rank_config", out);
  }
}

void runTransfers(Member& m, const Options& o, Outcome* out) {
  const uint64_t count = o.counts.front();
  constexpr int kSalt = 3;
  int from = -1;  // the rank this one receives from, if any
  for (const auto& [src, dst] : o.transfers) {
    if (dst == m.rank) from = src;
    if (src != m.rank) continue;
    for (uint64_t i = 0; i < count; ++i) m.send[i] = valueOf(m.base, src, 0, i, kSalt);
    watchdogNote("send to " + std::to_string(dst));
    hc_status_t rc = hc_send(m.send, count, HC_INT32, dst, m.comm, nullptr, &m.reqs[0]);
    if (rc != HC_OK) return recordFailure(out, rc, m, "hc_send to " + std::to_string(dst));
    std::printf("sent\n");
    std::fflush(stdout);
  }
  if (from >= 0) {
    std::memset(m.recv, 0xA5, count * sizeof(int32_t));
    watchdogNote("receive from " + std::to_string(from));
    hc_status_t rc = hc_recv(m.recv, count, HC_INT32, from, m.comm, nullptr, &m.reqs[1]);
    if (rc != HC_OK) return recordFailure(out, rc, m, "hc_recv from " + std::to_string(from));
    std::printf("receiving\n");
    std::fflush(stdout);
  }
  watchdogNote("transfers of " + m.name);
  if (hc_status_t rc = waitRequests(m); rc != HC_OK) return recordFailure(out, rc, m, "transfer");
  if (from < 0) return;
  out->wrong += countWrong(
      m, count, [&](uint64_t i) { return valueOf(m.base, from, 0, i, kSalt); },
      "transfer from rank " + std::to_string(from));
  if (!o.recvAgain) return;
  // A receive its sender never matched with a send: fails, or hangs until the watchdog.
  watchdogNote("second receive from " + std::to_string(from));
  hc_status_t rc = hc_recv(m.recv, count, HC_INT32, from, m.comm, nullptr, &m.reqs[1]);
  if (rc == HC_OK) rc = hc_wait(&m.reqs[1]);
  if (rc != HC_OK) return recordFailure(out, rc, m, "second receive from " + std::to_string(from));
}

}  // namespace hc::integ::identity
